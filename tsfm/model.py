"""The Forecaster: scale -> patch-embed -> backbone -> quantile head -> unscale (DESIGN §2).

The pipeline is fixed; only the backbone varies, chosen by name from the registry. Token ``j``'s output forecasts
patch ``j + 1``. To forecast ``H`` steps the model appends ``ceil(H / P) - 1`` fully masked tokens after the
context and reads the last ``ceil(H / P)`` outputs: one causal pass, nothing fed back. Horizons longer than the
``train_horizon_patches`` seen in training simply use more masked tokens; the model then extrapolates from the
contiguous patch masking it was trained with, which is less accurate (``forecast.predict`` warns about it).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.utils import _pytree as pytree

from tsfm.backbones import build_backbone
from tsfm.config import DECODINGS, ModelConfig, levels_are_symmetric, naive_blend_problem
from tsfm.heads import QuantileHead, balanced_pinball_loss, pinball_loss, quantile_match_loss
from tsfm.mlp import ResidualMLP
from tsfm.naive_blend import blend_with_seasonal_naive
from tsfm.patching import PatchEmbedding, contiguous_patch_mask, patch_tokens, patchify
from tsfm.scaling import ScaleParams, apply_scale, fit_scale, invert_scale
from tsfm.seasonality import detect_period, seasonal_naive_hint

#: Scaled training targets are clipped to this magnitude. A near-constant context (scale ~1e-5) makes any later
#: change thousands of "standard deviations" large; the pinball gradient is bounded whatever the error, but such
#: windows would dominate the reported (and validation) loss. Nothing a model could predict lies beyond it.
TARGET_CLAMP = 100.0

#: Autoregressive decoding re-reads its window (re-fitted scale, rebuilt state) every this many fed-back patches.
REANCHOR_PATCHES = 4
#: Up to this many tokens continue a state through ``step`` one by one rather than the backbone's parallel
#: ``forward``, whose chunkwise forms pad a short sequence to a whole chunk (up to 64x the work).
STEP_TOKENS = 4


def num_parameters(module: nn.Module) -> int:
    """Number of parameter values in ``module``, counting everything (embedding, backbone, head, norms; shared
    parameters once, frozen ones included): the one place the project counts parameters."""
    return sum(p.numel() for p in module.parameters())


def has_no_negative_value(context: torch.Tensor) -> torch.Tensor:
    """``[B]`` bool: the series of ``context [B, T]`` with at least one observed value and none below 0."""
    observed = ~torch.isnan(context)
    return observed.any(-1) & torch.where(observed, context >= 0, True).all(-1)


def clamp_if_nonnegative(forecast: torch.Tensor, nonnegative: torch.Tensor) -> torch.Tensor:
    """``forecast [B, Q, H]`` with values below 0 set to 0 in the rows where ``nonnegative [B]`` is true
    (``ModelConfig.infer_nonnegative``: a series never negative so far, such as counts, sales or loads, gets no
    negative quantile, which could only add loss if it stays so; TimesFM 2.5's ``infer_is_positive``)."""
    return torch.where(nonnegative[:, None, None], forecast.clamp(min=0.0), forecast)


class ForwardOutput(NamedTuple):
    """Raw model output: quantiles of the next patch for every token, in scaled space, plus the scaling used."""

    quantiles: torch.Tensor  # [B, N + M, Q, P]
    scale: ScaleParams


class Forecaster(nn.Module):
    """A probabilistic forecaster over patches of ``config.patch_size`` steps with a pluggable backbone."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        # (missing tokens, device, dtype, weights' version) -> the one-series state after them (read_context)
        self._missing_states: dict[tuple[Any, ...], Any] = {}
        hidden = int(config.mlp_hidden_mult * config.d_model)
        self.embed = PatchEmbedding(config.patch_size, hidden, config.d_model)
        self.backbone = build_backbone(config)
        self.head = QuantileHead(config.d_model, hidden, len(config.quantile_levels), config.patch_size)
        # Zero at initialisation: a model with the embedding starts exactly as one without it.
        self.horizon = nn.Embedding(config.train_horizon_patches, config.d_model) if config.horizon_embedding else None
        if self.horizon is not None:
            nn.init.zeros_(self.horizon.weight)
        # The seasonal hint's embedding, also zero at initialisation (both output layers), for the same reason.
        self.hint = ResidualMLP(2 * config.patch_size, hidden, config.d_model) if config.seasonal_hint else None
        if self.hint is not None:
            for layer in (self.hint.out, self.hint.residual):
                nn.init.zeros_(layer.weight)
                nn.init.zeros_(layer.bias)
        # The Seasonal-Naive gate, zero at initialisation for the same reason.
        self.gate = nn.Linear(config.d_model, 1) if config.naive_gate else None
        if self.gate is not None:
            nn.init.zeros_(self.gate.weight)
            nn.init.zeros_(self.gate.bias)

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        return self.config.quantile_levels

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def num_parameters(self) -> int:
        """Every parameter: embedding, backbone, head, norms (see :func:`num_parameters`)."""
        return num_parameters(self)

    def forward(
        self, context: torch.Tensor, num_future_tokens: int = 0, scale: ScaleParams | None = None
    ) -> ForwardOutput:
        """Run the pipeline once.

        Args:
            context: ``[B, T]`` raw values, NaN where missing (left padding included).
            num_future_tokens: fully masked tokens appended after the context (``ceil(H / P) - 1`` for horizon H).
            scale: use this scaling instead of fitting one on ``context`` (a stream keeps the scale it opened with).
        Returns:
            ``ForwardOutput(quantiles [B, ceil(T/P) + num_future_tokens, Q, P], scale)``; output ``j`` forecasts
            the patch after token ``j``.
        """
        if context.dim() != 2:
            raise ValueError(f"context must be [batch, time], got shape {tuple(context.shape)}")
        self.check_context_length(context.shape[-1])
        scale = self.fit_scale(context) if scale is None else scale
        scaled = apply_scale(context, scale)
        tokens = self._scaled_tokens(scaled)
        needs_naive = self.gate is not None or num_future_tokens > 0  # the gate, or the hint's masked tokens
        naive = self._seasonal_naive(scaled, num_future_tokens + 1) if needs_naive else None
        if num_future_tokens > 0:
            hint = self._hint_of(naive, num_future_tokens)
            tokens = torch.cat([tokens, self._future_tokens(context.shape[0], num_future_tokens, tokens, hint)], dim=1)
        hidden = self.backbone(tokens)
        quantiles = self.head(hidden)
        if self.gate is not None:  # the forecast tokens: the last context token and the masked future tokens
            n = num_future_tokens + 1
            quantiles = torch.cat([quantiles[:, :-n], self._gated(quantiles[:, -n:], hidden[:, -n:], naive)], dim=1)
        return ForwardOutput(quantiles, scale)

    def fit_scale(self, context: torch.Tensor) -> ScaleParams:
        """The scaling this model reads ``context [B, T]`` with: NaN-aware, centred where ``config.scale_loc_steps``
        says (:func:`tsfm.scaling.fit_scale`)."""
        return fit_scale(context, self.config.scale_loc_steps)

    def check_context_length(self, length: int) -> None:
        """Refuse contexts past the trained length for backbones that cannot read them (the Transformer's RoPE
        positions past it are untrained); recurrent backbones read any length."""
        limit = self.config.context_length
        if length > limit and not self.backbone.reads_past_trained_length:
            raise ValueError(
                f"context_length: backbone {self.backbone.spec!r} was trained on contexts of at most {limit} steps "
                f"and cannot read {length}; pass context_length <= {limit} (recurrent backbones read any length)"
            )

    def continue_state(self, tokens: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        """The backbone over ``tokens [B, T, d]`` from ``state`` -> ``(hidden [B, T, d], state after)``: a few
        tokens go through ``step`` (see :data:`STEP_TOKENS`), more through ``forward``. ``state`` is not written."""
        if tokens.shape[1] > STEP_TOKENS:
            return self.backbone(tokens, state=state, return_state=True)
        outputs = []
        for t in range(tokens.shape[1]):
            y, state = self.backbone.step(tokens[:, t], state)
            outputs.append(y)
        return torch.stack(outputs, dim=1), state

    def read_context(self, context: torch.Tensor, scale: ScaleParams) -> tuple[torch.Tensor, Any]:
        """The backbone over a raw context ``[B, T]`` read as training presented contexts: ``(hidden at the last
        token [B, d], state after it)``.

        Training windows are always ``config.context_length`` steps wide, a shorter history left-padded with NaN
        (the sampler), so the backbone has only ever read a context after the run of fully missing patch tokens
        that fills the window. Read without them, a short context starts the backbone from a state (for attention,
        a key set) it never saw in training; the shipped default then forecast short trends backwards (its median
        step against the context's slope: correlation -0.65 on ``m3_yearly``; MASE 1.20 x Seasonal Naive there,
        0.95 with the missing tokens; ``benchmarks/RESULTS.md``, fourteenth session). So a context shorter than
        the trained window is read after the missing tokens it had in training. They do not depend on the input
        (a fully missing patch embeds to one fixed token), so the state after them is computed for one series,
        kept until the weights change, and shared by the batch: the cost stays that of the context's own patches.
        Longer contexts (recurrent backbones read any length) are read as they are, and so is every context when
        ``config.pad_short_contexts`` is off (the earlier reading, kept to score sweep runs comparably).
        """
        tokens = self._context_tokens(context, scale)
        hidden, state = self.backbone(tokens, state=self._padding_state(tokens), return_state=True)
        return hidden[:, -1], state

    def _padding_state(self, tokens: torch.Tensor) -> Any:
        """The state that context ``tokens [B, n, d]`` are read from: after the fully missing tokens that fill the
        trained window before them (``read_context``), or None where there are none or ``pad_short_contexts`` is
        off. Of batch 1 for a backbone that shares one state across the batch, else one copy per series."""
        missing = self.config.context_length // self.config.patch_size - tokens.shape[1]
        if missing <= 0 or not self.config.pad_short_contexts:
            return None
        return self._state_after_missing_tokens(missing, tokens)

    def _state_after_missing_tokens(self, count: int, like: torch.Tensor) -> Any:
        """The backbone's state after ``count`` fully missing patch tokens, for ``like.shape[0]`` series (one state
        of batch 1 for them all where the backbone ``shares_state_across_batch``).

        The one-series state is kept per ``(count, device, dtype)`` while no parameter changes: every in-place
        write to a parameter (an optimizer step, ``load_state_dict``) bumps its version counter, which is part of
        the key. Kept only without autograd (inference), where the state carries no graph."""
        version = sum(parameter._version for parameter in self.parameters())
        key = (count, like.device, like.dtype, version)
        keep = not torch.is_grad_enabled()
        state = self._missing_states.get(key) if keep else None
        if state is None:
            gap = like.new_full((1, count, self.config.patch_size), float("nan"))
            _, state = self.backbone(self.embed(patch_tokens(gap)), return_state=True)
            if keep:
                if any(cached[3] != version for cached in self._missing_states):
                    self._missing_states.clear()  # older weights' states
                self._missing_states[key] = state
        if self.backbone.shares_state_across_batch:
            return state
        return pytree.tree_map(lambda leaf: leaf.expand(like.shape[0], *leaf.shape[1:]).contiguous(), state)

    def _context_tokens(self, context: torch.Tensor, scale: ScaleParams) -> torch.Tensor:
        """``[B, ceil(T/P), d]``: the scaled context, patched (left-padded with NaN) and embedded."""
        return self._scaled_tokens(apply_scale(context, scale))

    def _scaled_tokens(self, scaled: torch.Tensor) -> torch.Tensor:
        return self.embed(patch_tokens(patchify(scaled, self.config.patch_size)))

    def _future_tokens(self, batch: int, count: int, like: torch.Tensor, hint: torch.Tensor | None = None
                       ) -> torch.Tensor:
        """``[B, count, d]``: embedded fully masked patches, plus the horizon embedding when the model has one, plus
        the embedded seasonal hint ``[B, count * P]`` (scaled, NaN where none) on the patches that have one."""
        patch = self.config.patch_size
        masked = like.new_full((batch, count, patch), float("nan"))
        tokens = self.embed(patch_tokens(masked))
        if self.horizon is not None:
            tokens = self._add_horizon(tokens, count)
        if self.hint is not None and hint is not None:
            patches = hint.reshape(batch, count, patch).to(tokens.dtype)
            present = (~torch.isnan(patches)).any(dim=-1, keepdim=True)
            tokens = tokens + self.hint(patch_tokens(patches)) * present.to(tokens.dtype)
        return tokens

    @property
    def streams_recompute(self) -> bool:
        """Whether a stream of this model forecasts by re-reading its kept tail rather than from a carried state: a
        Transformer carries no state, and the sign-flip average (``config.flip_equivariant``) needs the mirrored
        series' state as well, which one carried state does not hold."""
        return self.backbone.name == "transformer" or self.config.flip_equivariant

    @property
    def reads_seasonal_naive(self) -> bool:
        """Whether forecasting reads Seasonal Naive from the raw context (the hint or the gate): decoding from a
        carried state then needs that context too."""
        return self.hint is not None or self.gate is not None

    def _seasonal_naive(self, scaled: torch.Tensor, num_patches: int) -> torch.Tensor | None:
        """Seasonal-Naive values ``[B, num_patches * P]`` after the scaled context ``[B, T]`` (the last season
        repeated, the period read from the context; NaN where there is none), or None when the model reads none."""
        if not self.reads_seasonal_naive:
            return None
        with torch.autocast(scaled.device.type, enabled=False):
            values = scaled.float()
            return seasonal_naive_hint(values, detect_period(values), num_patches * self.config.patch_size)

    def _hint_of(self, naive: torch.Tensor | None, num_future_tokens: int) -> torch.Tensor | None:
        """The seasonal hint of ``num_future_tokens`` masked tokens from the Seasonal-Naive values after the
        context, or None when the model takes no hint. Future token ``k`` stands for forecast patch ``k`` (the one
        the token before it forecasts) and carries that patch's values while it forecasts patch ``k + 1``."""
        if self.hint is None or naive is None or num_future_tokens <= 0:
            return None
        return naive[:, : num_future_tokens * self.config.patch_size]

    def _gated(self, quantiles: torch.Tensor, hidden: torch.Tensor, naive: torch.Tensor | None) -> torch.Tensor:
        """``quantiles [B, n, Q, P]`` of ``n`` forecast tokens (scaled) moved towards the Seasonal-Naive values of
        the ``n`` patches they forecast (``naive [B, >= n * P]``, NaN where none: no move) by the gate's weight
        from each token's ``hidden [B, n, d]``, every quantile by the same amount."""
        assert self.gate is not None and naive is not None
        batch, count, _, patch = quantiles.shape
        target = naive[:, : count * patch].reshape(batch, count, patch).to(quantiles.dtype)
        weight = self.gate(hidden).to(quantiles.dtype)  # [B, n, 1]
        shift = torch.nan_to_num(target - quantiles[:, :, self._median_index], nan=0.0) * weight
        return quantiles + shift[:, :, None, :]

    def _add_horizon(self, tokens: torch.Tensor, num_future_tokens: int) -> torch.Tensor:
        """Add the horizon embedding to the last ``num_future_tokens`` tokens (future token ``k`` forecasts patch
        ``k + 2`` after the context); indices past the trained horizon reuse the last one."""
        assert self.horizon is not None
        index = torch.arange(num_future_tokens, device=tokens.device).clamp(max=self.horizon.num_embeddings - 1)
        future = tokens[:, -num_future_tokens:] + self.horizon(index).to(tokens.dtype)
        return torch.cat([tokens[:, :-num_future_tokens], future], dim=1)

    @torch.no_grad()
    def forecast(
        self,
        context: torch.Tensor,
        prediction_length: int,
        decoding: str | None = None,
        scale: ScaleParams | None = None,
        infer_nonnegative: bool | None = None,
        naive_blend: str | None = None,
        flip_equivariant: bool | None = None,
    ) -> torch.Tensor:
        """Quantile forecasts ``[B, Q, H]`` in the series' units, sorted along Q, for ``context [B, T]``.

        ``decoding`` overrides ``config.decoding`` (``"masked"`` or ``"autoregressive"``); both give the same first
        patch. ``scale`` fixes the scaling (default: fitted on the context), as a stream does.
        ``infer_nonnegative``, ``naive_blend`` and ``flip_equivariant`` override the config's
        (:mod:`tsfm.naive_blend`: a second, shorter forecast backtests the model on the context's last steps).
        """
        if prediction_length <= 0:
            raise ValueError(f"prediction_length must be positive, got {prediction_length}")
        decoding = self.config.decoding if decoding is None else decoding
        if decoding not in DECODINGS:
            raise ValueError(f"decoding must be one of {', '.join(DECODINGS)}, got {decoding!r}")
        nonnegative = self.config.infer_nonnegative if infer_nonnegative is None else infer_nonnegative
        flip = self.config.flip_equivariant if flip_equivariant is None else flip_equivariant
        if flip and not levels_are_symmetric(self.quantile_levels):
            raise ValueError(f"flip_equivariant needs quantile levels symmetric about 0.5, got {self.quantile_levels}")
        blend = self.config.naive_blend if naive_blend is None else naive_blend
        if problem := naive_blend_problem(blend):
            raise ValueError(problem)
        context = context.to(self.device, torch.float32)
        self.check_context_length(context.shape[-1])
        out = self._network_forecast(context, prediction_length, decoding, scale, flip)
        out = self.blend_with_seasonal_naive(context, out, decoding, blend, flip)
        return clamp_if_nonnegative(out, has_no_negative_value(context)) if nonnegative else out

    def _network_forecast(self, context: torch.Tensor, prediction_length: int, decoding: str,
                          scale: ScaleParams | None, flip: bool) -> torch.Tensor:
        """The network's own quantiles ``[B, Q, H]`` for ``context [B, T]`` (no blend, no clamp). With ``flip``,
        the series and its mirror image ``-x`` go through in one batch, and the mirror's forecast is turned back
        (quantile ``q`` of ``x`` is minus quantile ``1 - q`` of ``-x``: the levels reversed) and averaged in."""
        if flip:
            count = context.shape[0]
            if scale is not None:  # the mirror's scale: the centre mirrored, the spread the same
                scale = ScaleParams(torch.cat([scale.loc, -scale.loc]), torch.cat([scale.scale, scale.scale]))
            both = self._network_forecast(torch.cat([context, -context]), prediction_length, decoding, scale, False)
            return 0.5 * (both[:count] - both[count:].flip(1))
        window = context if scale is None else None  # a fitted scale is re-fitted when the window is re-read
        scale = self.fit_scale(context) if scale is None else scale
        if decoding == "masked":
            return self._masked_forecast(context, scale, prediction_length)
        last, state = self.read_context(context, scale)
        return self.decode_from_state(last, state, scale, prediction_length, decoding, window=window,
                                      hint_context=context)

    def _masked_forecast(self, context: torch.Tensor, scale: ScaleParams, prediction_length: int) -> torch.Tensor:
        """Masked decoding in one pass: the context's tokens and the masked future tokens go through the backbone
        together, from the padding state (``read_context``), and no state is kept after them. The same forecast as
        ``read_context`` then ``decode_from_state`` (causal mixers: a context token never reads a future one), with
        one backbone call instead of two and, for attention, no key cache joined per series at every layer."""
        patch = self.config.patch_size
        num_out = math.ceil(prediction_length / patch)
        scaled = apply_scale(context, scale)
        naive = self._seasonal_naive(scaled, num_out)
        tokens = self._scaled_tokens(scaled)
        state = self._padding_state(tokens)
        if num_out > 1:
            future = self._future_tokens(tokens.shape[0], num_out - 1, tokens, self._hint_of(naive, num_out - 1))
            tokens = torch.cat([tokens, future], dim=1)
        hidden = self.backbone(tokens, state=state)
        return self._masked_quantiles(hidden[:, -num_out:], naive, scale)[..., :prediction_length]

    def _masked_quantiles(self, hidden: torch.Tensor, naive: torch.Tensor | None, scale: ScaleParams
                          ) -> torch.Tensor:
        """Quantiles ``[B, Q, n * P]`` (sorted, unscaled) of the ``n`` patches that ``hidden [B, n, d]`` forecast:
        the last context token's output, then the masked future tokens'."""
        batch, num_out = hidden.shape[:2]
        quantiles = self.head(hidden)
        if self.gate is not None:
            quantiles = self._gated(quantiles, hidden, naive)
        quantiles = quantiles.sort(dim=2).values  # [B, n, Q, P], scaled
        return invert_scale(quantiles.permute(0, 2, 1, 3).reshape(batch, -1, num_out * self.config.patch_size), scale)

    def blend_with_seasonal_naive(self, context: torch.Tensor, quantiles: torch.Tensor, decoding: str,
                                  how: str, flip: bool = False) -> torch.Tensor:
        """``quantiles [B, Q, H]`` of ``context [B, T]`` moved towards Seasonal Naive as ``how``
        (``ModelConfig.naive_blend``) says, backtested with this model's own ``decoding`` forecasts (unblended,
        unclamped; mirrored and averaged too where ``flip`` says the forecast was):
        :func:`tsfm.naive_blend.blend_with_seasonal_naive`. ``forecast`` and streams share it."""

        def backtest(history: torch.Tensor, horizon: int) -> torch.Tensor:
            return self.forecast(history, horizon, decoding, infer_nonnegative=False, naive_blend="off",
                                 flip_equivariant=flip)[:, self._median_index]

        return blend_with_seasonal_naive(context, quantiles, self._median_index, how, backtest)

    @property
    def _median_index(self) -> int:
        return self.quantile_levels.index(0.5)

    def decode_from_state(
        self,
        last_hidden: torch.Tensor,
        state: Any,
        scale: ScaleParams,
        prediction_length: int,
        decoding: str,
        window: torch.Tensor | None = None,
        hint_context: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Quantile forecasts ``[B, Q, H]`` from the backbone's output at the last context token and its state after
        it (``state`` is not written): the masked future tokens continue the state; under ``"autoregressive"`` the
        median is then fed back patch by patch with the masked spread kept around it.

        The median path re-reads ``window`` (the raw context the state was read from) every ``REANCHOR_PATCHES``
        patches: the fed-back median is appended, the window keeps its last ``context_length`` steps (or its own
        longer length), the scale is fitted again and the state rebuilt; between re-reads each fed-back patch is one
        recurrent step at the current scale. Re-fitting matters (a drifting forecast otherwise leaves the
        standardised range the model was trained on: ``ett2/H/long`` MASE 1.06 re-fitted every patch, 1.27 never,
        ``benchmarks/RESULTS.md``); stepping saves most passes (``ceil(n / REANCHOR_PATCHES)`` for ``n`` patches).
        ``window=None`` (a stream's fixed scale) never re-reads: the scale stays and the state holds everything.
        ``hint_context`` is the raw context (at least its last ``context_length`` steps) that a model with
        ``config.seasonal_hint`` or ``config.naive_gate`` reads Seasonal Naive from.
        """
        patch, batch = self.config.patch_size, last_hidden.shape[0]
        median_index, num_out = self._median_index, math.ceil(prediction_length / patch)
        if self.gate is not None and decoding != "masked":
            raise ValueError(f"decoding: a model with naive_gate decodes 'masked' only, got {decoding!r}")
        naive = None
        if self.reads_seasonal_naive:
            if hint_context is None:
                raise ValueError("hint_context: this model reads Seasonal Naive from the context (seasonal_hint, "
                                 "naive_gate); pass the raw context the state was read from")
            naive = self._seasonal_naive(apply_scale(hint_context.to(torch.float32), scale), num_out)
        hidden = last_hidden[:, None]
        if num_out > 1:
            hint = self._hint_of(naive, num_out - 1)
            future, _ = self.continue_state(self._future_tokens(batch, num_out - 1, hidden, hint), state)
            hidden = torch.cat([hidden, future], dim=1)
        masked = self._masked_quantiles(hidden, naive, scale)  # [B, Q, nP]
        if decoding == "masked" or prediction_length <= patch:
            return masked[..., :prediction_length]
        keep = None if window is None else max(self.config.context_length, window.shape[-1])
        center = masked[:, median_index : median_index + 1]
        steps = [center[:, 0, :patch]]
        for k in range(1, num_out):
            if window is not None and k % REANCHOR_PATCHES == 0:  # re-read the window ending with the median
                window = torch.cat([window, *steps[-REANCHOR_PATCHES:]], dim=1)[:, -keep:]
                scale = self.fit_scale(window)
                hidden_t, state = self.read_context(window, scale)
            else:
                token = self.embed(patch_tokens(apply_scale(steps[-1], scale)[:, None]))[:, 0]
                hidden_t, state = self.backbone.step(token, state)
            scaled = self.head(hidden_t[:, None])[:, 0].sort(dim=1).values[:, median_index]
            steps.append(invert_scale(scaled, scale))
        median = torch.cat(steps, dim=1)
        return (median[:, None] + (masked - center))[..., :prediction_length].sort(dim=1).values

    def training_loss(
        self,
        context: torch.Tensor,
        target: torch.Tensor,
        *,
        mask_ratio: float = 0.0,
        max_mask_run: int = 4,
        generator: torch.Generator | None = None,
        hidden_patches: torch.Tensor | None = None,
        teacher: Forecaster | None = None,
        distill_weight: float = 0.0,
        window_balance: float | None = None,
    ) -> torch.Tensor:
        """Pinball loss of next-patch forecasts over the context and the future (DESIGN §2.5).

        Args:
            context: ``[B, T]`` with ``T`` a multiple of the patch size (left-padded with NaN by the sampler).
            target: ``[B, H]`` the steps right after the context, NaN where unknown.
            mask_ratio: fraction of context patches hidden in contiguous runs (contiguous patch masking).
            max_mask_run: longest hidden run, in patches.
            generator: random source of the mask drawn from ``mask_ratio``.
            hidden_patches: ``[B, T / P]`` bool, patches to hide (True), drawn by the caller; replaces the
                ``mask_ratio`` draw (the GPU data path draws it with the batch, on the device).
            teacher: a trained model of the same patch size and levels (knowledge distillation): the loss becomes
                ``(1 - distill_weight) * pinball + distill_weight * quantile_match_loss`` against the teacher's
                quantiles for the same tokens, read from the same visible context in the same scale (no gradient).
            distill_weight: the teacher's share of the loss, in [0, 1].
            window_balance: ``None``: the pinball loss pooled over the batch's steps; a float: each window's
                pinball loss by its logarithm, :func:`tsfm.heads.balanced_pinball_loss` with this ``balance``.
        Every token's forecast of the following patch is scored wherever that patch has values, so the context
        itself supervises next-patch prediction and the masked future tokens supervise the horizon. The scale is
        fitted on what the model sees (hidden patches excluded), exactly as at inference.
        """
        patch = self.config.patch_size
        if context.shape[-1] % patch:
            raise ValueError(f"training context length must be a multiple of {patch}, got {context.shape[-1]}")
        batch, num_ctx = context.shape[0], context.shape[-1] // patch
        num_out_future = math.ceil(target.shape[-1] / patch)
        if hidden_patches is None and mask_ratio > 0:
            hidden_patches = contiguous_patch_mask(
                batch, num_ctx, mask_ratio=mask_ratio, max_run=max_mask_run, generator=generator
            ).to(context.device)
        visible = context
        if hidden_patches is not None:
            if hidden_patches.shape != (batch, num_ctx):
                raise ValueError(f"hidden_patches must be [{batch}, {num_ctx}], got {tuple(hidden_patches.shape)}")
            visible = context.masked_fill(hidden_patches.repeat_interleave(patch, dim=1), float("nan"))
        out = self(visible, num_future_tokens=num_out_future - 1)
        truth = self.next_patch_truth(context, target, out.scale)
        if window_balance is None:
            loss = pinball_loss(out.quantiles, truth, self.quantile_levels)
        else:
            loss = balanced_pinball_loss(out.quantiles, truth, self.quantile_levels, window_balance)
        if teacher is None:
            return loss
        with torch.no_grad():
            guide = teacher(visible, num_future_tokens=num_out_future - 1, scale=out.scale).quantiles
        return (1.0 - distill_weight) * loss + distill_weight * quantile_match_loss(out.quantiles, guide, truth)

    def next_patch_truth(self, context: torch.Tensor, target: torch.Tensor, scale: ScaleParams) -> torch.Tensor:
        """``[B, N, P]``: the scaled patch that follows each of the ``N`` tokens of a training forward (context
        tokens, then masked future tokens), NaN where unknown: what :meth:`training_loss` scores each token's
        quantiles against."""
        patch = self.config.patch_size
        num_out_future = math.ceil(target.shape[-1] / patch)
        pad = num_out_future * patch - target.shape[-1]
        future = torch.nn.functional.pad(target, (0, pad), value=float("nan"))
        truth = apply_scale(torch.cat([context, future], dim=-1), scale)
        return truth.reshape(context.shape[0], -1, patch)[:, 1:].clamp(-TARGET_CLAMP, TARGET_CLAMP)

    def scored_steps(self, context: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """How many target steps :meth:`training_loss` scores in each row (``[B]``, int64).

        That loss is a mean over the scored steps of the whole batch, so a batch split over data-parallel processes
        is a weighted mean of the parts' losses with these counts as weights (tsfm.pipelines.train uses this to
        make the averaged gradient equal the full batch's). Every step after the first patch of ``context`` +
        ``target`` is scored where it is not NaN; scaling keeps NaN where the input has it and nowhere else.
        """
        patch = self.config.patch_size
        truth = torch.cat([context, target], dim=-1)[:, patch:]
        return (~torch.isnan(truth)).sum(dim=-1)
