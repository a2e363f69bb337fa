"""Model configuration: one dataclass that fully describes a Forecaster, and the named scale presets.

The config is what a checkpoint stores next to its weights (``config.json``), so every field must be plain JSON
(ints, floats, strings, lists). Nothing here imports torch modules: building a model from a config is
``tsfm.model.Forecaster(config)``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

DEFAULT_QUANTILE_LEVELS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


DECODINGS = ("masked", "autoregressive")
"""How a Forecaster turns one context into a multi-patch forecast (``ModelConfig.decoding``)."""

NAIVE_BLENDS = ("off", "inverse_mae", "inverse_mse", "switch")
"""How a forecast may lean towards Seasonal Naive (``ModelConfig.naive_blend``, :mod:`tsfm.naive_blend`)."""


def naive_blend_problem(value: object, *, allow_none: bool = False) -> str | None:
    """What is wrong with ``value`` as a ``naive_blend`` setting (``None`` too, unless ``allow_none``: "the model's
    own"), or ``None`` if nothing: the one message that the config, ``Forecaster.forecast``, ``predict`` and streams
    raise in their own error types."""
    if value in NAIVE_BLENDS or (allow_none and value is None):
        return None
    return f"naive_blend must be one of {', '.join(NAIVE_BLENDS)}{' or None' if allow_none else ''}, got {value!r}"

def levels_are_symmetric(levels: tuple[float, ...]) -> bool:
    """Whether every quantile level ``q`` has its mirror ``1 - q`` at the mirrored position (what turning a forecast
    upside down needs: the flipped series' quantile ``1 - q`` is minus the series' quantile ``q``)."""
    return all(abs(low + high - 1.0) < 1e-9 for low, high in zip(levels, reversed(levels), strict=True))


INFERENCE_FIELDS = ("decoding", "infer_nonnegative", "pad_short_contexts", "naive_blend", "flip_equivariant")
"""``ModelConfig`` fields that only say how forecasts are made: the weights, a training run and a stream's state do
not depend on them, so they may differ between a checkpoint and the model that reads it
(:meth:`ModelConfig.same_network`)."""


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild a Forecaster.

    Attributes:
        backbone: registered backbone spec, e.g. ``"xlstm[3:1]"``, ``"mamba2"``, ``"gdn"``, ``"gdn[neg_eigval]"``,
            ``"transformer"``; the part in brackets is parsed by the backbone class itself.
        d_model: token width inside the backbone.
        n_layers: number of residual blocks (each block = mixer + gated FFN).
        n_heads: heads of the sequence mixer (head dim = d_model // n_heads).
        ffn_mult: hidden width of the gated FFN as a multiple of ``d_model`` (rounded up to a multiple of 16).
        conv_kernel: width of the short causal depthwise convolution used by Mamba-2, Gated DeltaNet and the
            mLSTM layers of ``xlstm[a:b,conv]``.
        chunk_size: chunk length handed to the chunkwise kernels (tokens, not time steps).
        patch_size: time steps per token (DESIGN §2: 32).
        quantile_levels: levels the head predicts, sorted, in (0, 1).
        context_length: longest context (time steps) the model reads; longer inputs keep their last steps.
        train_horizon_patches: output patches supervised in training beyond the context (so
            ``train_horizon_patches - 1`` masked future tokens were seen); longer horizons extrapolate.
        mlp_hidden_mult: hidden width of the residual-MLP patch embedding and quantile head, times ``d_model``.
        horizon_embedding: add a learned embedding of the horizon index (1st, 2nd, ... masked future token) to
            the masked future tokens. Without it every future token has the same input, and a recurrent backbone
            must tell the 2nd future patch from the 10th by its state alone.
        seasonal_hint: give each masked future token the Seasonal-Naive values of its patch (the last season of
            the context repeated, the period read from the context by :func:`tsfm.seasonality.detect_period`)
            through an embedding of its own that starts at zero, so a model grown from one without the hint
            starts out computing the same function.
        naive_gate: a learned gate on every forecast token that moves its quantiles (each by the same amount, so
            they stay sorted) towards the Seasonal-Naive values of the patch it forecasts, by a weight read from
            the token's hidden state: the inference-time blend (``naive_blend``) learned inside the model, where
            an exact copy of the last season costs nothing (a model otherwise redraws it from attention and loses
            its peaks). The gate is linear and starts at zero, so a model grown by it starts out computing the same
            function. Masked decoding only. Opt-in: one continuation of the default grown by it scored worse with
            the blend on top (``benchmarks/RESULTS.md``, thirty-fourth session).
        decoding: how forecasts past the first output patch are made. ``"masked"`` (DESIGN §2.3): one pass,
            masked future tokens forecast every patch. ``"autoregressive"``: the median path is fed back patch by
            patch (one recurrent step per patch from the backbone's carried state, the window re-read with a
            re-fitted scale every ``tsfm.model.REANCHOR_PATCHES`` patches), and each quantile keeps its
            masked-decoding distance from the median, so the spread still grows with the horizon. See
            :data:`DECODINGS`.
        infer_nonnegative: set to 0 the forecast values below 0 of every series whose observed context has no
            negative value (counts, sales, loads, prices), as TimesFM 2.5's ``infer_is_positive`` does; a series
            with a negative value is forecast as it is. An inference setting like ``decoding``: the weights do not
            depend on it, and ``Forecaster.forecast`` can override it per call.
        pad_short_contexts: read a context shorter than ``context_length`` after the fully missing patch tokens
            that filled every shorter history in training (``Forecaster.read_context``). ``False`` reads it alone,
            as every forecast did before the fourteenth session; kept so that the scaling sweep can score new runs
            as its earlier rows were scored (``tsfm.pipelines.sweep``), not for forecasting. An inference setting.
        naive_blend: move the forecast towards Seasonal Naive by how the two forecast the context's own last steps
            (``"inverse_mae"``, ``"inverse_mse"``, ``"switch"``; ``"off"``: the model's forecast as it is):
            :mod:`tsfm.naive_blend`.
            An inference setting; ``Forecaster.forecast`` can override it per call.
        flip_equivariant: forecast every series twice, as it is and turned upside down (``-x``), and average the
            first forecast with the second turned back (its quantile ``q`` is minus the flipped series' quantile
            ``1 - q``), so that a forecast of ``-x`` is exactly minus the forecast of ``x``, as TimesFM 2.5's
            ``force_flip_invariance`` does. A network learns no such symmetry exactly; the average removes the
            part of each forecast that breaks it, at twice the compute. Needs quantile levels symmetric about 0.5.
            An inference setting; ``Forecaster.forecast`` can override it per call.
        scale_loc_steps: centre each context on the mean of its last ``scale_loc_steps`` observed steps (its recent
            level) instead of its whole mean; the spread is still the whole context's (:func:`tsfm.scaling.fit_scale`).
            ``None`` (every checkpoint before it): the whole mean, DESIGN §2.1. Part of the network's function, not an
            inference setting: the weights learn the centre they were trained with; a run may change it over its
            ``--init-from`` checkpoint and adapt them.
    """

    backbone: str = "xlstm[3:1]"
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    ffn_mult: float = 2.0
    conv_kernel: int = 4
    chunk_size: int = 64
    patch_size: int = 32
    quantile_levels: tuple[float, ...] = DEFAULT_QUANTILE_LEVELS
    context_length: int = 2048
    train_horizon_patches: int = 4
    mlp_hidden_mult: float = 2.0
    horizon_embedding: bool = False
    seasonal_hint: bool = False
    naive_gate: bool = False
    decoding: str = "masked"
    infer_nonnegative: bool = False
    pad_short_contexts: bool = True
    naive_blend: str = "off"
    flip_equivariant: bool = False
    scale_loc_steps: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "quantile_levels", tuple(float(q) for q in self.quantile_levels))
        problems = []
        for name in ("d_model", "n_layers", "n_heads", "conv_kernel", "chunk_size", "patch_size",
                     "context_length", "train_horizon_patches"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.d_model, int) and isinstance(self.n_heads, int) and self.n_heads > 0 \
                and self.d_model % self.n_heads:
            problems.append(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        levels = self.quantile_levels
        if not levels or any(not 0.0 < q < 1.0 for q in levels) or list(levels) != sorted(set(levels)):
            problems.append(f"quantile_levels must be strictly increasing values in (0, 1), got {levels!r}")
        if 0.5 not in levels:
            problems.append("quantile_levels must contain 0.5 (the median is the point forecast)")
        if self.decoding not in DECODINGS:
            problems.append(f"decoding must be one of {', '.join(DECODINGS)}, got {self.decoding!r}")
        if self.naive_gate and self.decoding != "masked":
            problems.append(f"decoding must be 'masked' for a model with naive_gate, got {self.decoding!r}")
        if not isinstance(self.infer_nonnegative, bool):
            problems.append(f"infer_nonnegative must be true or false, got {self.infer_nonnegative!r}")
        if problem := naive_blend_problem(self.naive_blend):
            problems.append(problem)
        if not isinstance(self.flip_equivariant, bool):
            problems.append(f"flip_equivariant must be true or false, got {self.flip_equivariant!r}")
        elif self.flip_equivariant and not levels_are_symmetric(levels):
            problems.append(f"flip_equivariant needs quantile_levels symmetric about 0.5, got {levels!r}")
        if not isinstance(self.pad_short_contexts, bool):
            problems.append(f"pad_short_contexts must be true or false, got {self.pad_short_contexts!r}")
        loc_steps = self.scale_loc_steps
        if loc_steps is not None and (not isinstance(loc_steps, int) or isinstance(loc_steps, bool) or loc_steps <= 0):
            problems.append(f"scale_loc_steps must be a positive integer or null, got {loc_steps!r}")
        if problems:
            raise ValueError("invalid ModelConfig: " + "; ".join(problems))

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def ffn_hidden(self) -> int:
        return int(-(-self.ffn_mult * self.d_model // 16) * 16)

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def same_network(self, other: ModelConfig) -> bool:
        """Whether ``other`` describes the same network (weights, state): equal but for :data:`INFERENCE_FIELDS`."""
        return not self.network_differences(other)

    def network_differences(self, other: ModelConfig) -> list[str]:
        """The fields, outside :data:`INFERENCE_FIELDS`, in which ``other`` differs (sorted; empty: the same
        network), for errors that say why two checkpoints cannot be combined."""
        ours, theirs = self.to_dict(), other.to_dict()
        return sorted(name for name in ours if name not in INFERENCE_FIELDS and ours[name] != theirs[name])

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["quantile_levels"] = list(self.quantile_levels)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown ModelConfig field(s): {', '.join(unknown)}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)
