"""Streaming forecasts: carry a backbone's recurrent state across new observations (issue 15).

A :class:`Stream` is opened from a context (one or many series, ragged, NaN allowed, exactly as ``predict`` takes
them), then fed new steps with :meth:`Stream.update` and asked for forecasts with :meth:`Stream.forecast` at any
time. An update costs O(new patches), not O(context): that is what a recurrent backbone buys.

Design (why it is exact, and where it deliberately is not the same as ``predict``):

* **Scale.** Each series' ``loc``/``scale`` is fitted once, on the context the stream opens with (as ``predict``
  fits it), and then kept fixed: every token the state has read was scaled with it, so changing it would make the
  state inconsistent. After each completed patch the stream compares the scale of its kept tail with the anchor;
  when the tail's ``scale`` is more than ``max_drift`` times larger or smaller, or its ``loc`` has moved by more
  than ``max_drift`` anchor scales, that series **re-anchors**: the scale is refitted on the kept tail (the last
  ``context_length`` steps) and the state recomputed from it. ``max_drift=None`` never re-anchors.
  ``Stream.reanchors`` counts re-anchors per series so it is never silent.
* **Patch grid and partial patches.** The grid is fixed when the stream opens: the context is left-padded with
  NaN to whole patches, as ``predict`` does, so its newest step ends a patch. New steps are buffered until a patch
  is complete; only complete patches enter the carried state. ``predict`` on a series whose length is not a multiple
  of the patch puts the padding *first* (its grid ends at the newest step), which no carried state can reproduce, so
  a forecast asked while a series has a partial patch buffered recomputes that series from its kept tail with the
  fixed scale — exactly the non-streaming path on the last ``context_length`` steps. At patch boundaries the forecast
  comes from the carried state: exactly the full forward over everything streamed (within float tolerance), read
  after the fully missing patches the opening context had (below).
* **Opening.** The state reads the opening context as ``Forecaster.forecast`` reads any context
  (``Forecaster.read_context``): a context shorter than the trained window comes after the fully missing patches
  that fill it, as every training window did. Those stay at the start of the state's history while it grows.
* **Forecasting never disturbs the state.** Masked future tokens and autoregressively fed-back median patches
  continue the carried state without writing it (``step`` and ``forward`` return new state tensors); the carried
  state only ever reads observed patches.
* **Transformer.** Its state would be a KV cache that grows with every patch and differs in length between series;
  the stream keeps no cache for it and **recomputes from the kept tail** (at most ``context_length`` steps, its
  trained limit) at every forecast.
* **CUDA graphs** (``cuda_graphs=True``, a model on a GPU): an update that brings every series exactly one new
  patch (the monitoring case: all series every few minutes) replays one captured per-patch update
  (:class:`tsfm.graphed_step.GraphedPatchStep`, one per stream) instead of launching its dozens of small kernels one
  by one: 4-13x faster on an H200 (``benchmarks/RESULTS.md``). Other updates take the eager path. Opt-in because a
  graph pins memory and fixes the batch; off (and refused) on the CPU and for the Transformer.
* **History.** The recurrent state remembers everything streamed, not only the last ``context_length`` steps: it
  equals ``Forecaster.forecast`` over the whole concatenated series with the fixed scale (``predict`` with a large
  enough ``context_length``), preceded by the opening's missing patches. The autoregressive median path likewise
  continues from the full state.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from tsfm import graphed_step
from tsfm.config import DECODINGS, DEFAULT_QUANTILE_LEVELS, ModelConfig, naive_blend_problem
from tsfm.forecast import _as_1d, _as_series_list, _check_context, interpolate_quantiles
from tsfm.model import Forecaster, clamp_if_nonnegative, has_no_negative_value
from tsfm.patching import patch_tokens
from tsfm.scaling import ScaleParams, apply_scale

#: Default re-anchoring bound: the tail's scale may grow or shrink by this factor, and its mean move by this many
#: anchor scales, before the state is recomputed. Twice the spread is well outside normal sampling noise of a
#: 2,048-step window but early enough that scaled inputs stay in the range the model was trained on.
DEFAULT_MAX_DRIFT = 2.0
FORMAT_VERSION = 1
#: Series per pass wherever a stream reads whole tails (prefill, the Transformer's recompute, the blend's backtest):
#: predict's workload, so batched like predict's default (1,000 contexts of 2,048 steps in one pass exhaust a 24 GB
#: machine, and the Transformer reads 1,000 tails 1.4x slower in one pass than in passes of 256 on the CPU).
TAIL_BATCH = 256


class StreamError(ValueError):
    """Bad input to a stream (wrong number of series, non-finite values, an incompatible snapshot...)."""


class Stream:
    """Open streams over ``B`` series of one :class:`~tsfm.model.Forecaster` (see the module docstring)."""

    def __init__(
        self,
        model: Forecaster,
        context: Any,
        *,
        context_length: int | None = None,
        max_drift: float | None = DEFAULT_MAX_DRIFT,
        decoding: str | None = None,
        cuda_graphs: bool = False,
    ) -> None:
        """Open a stream from ``context`` (as ``predict`` accepts it): prefill the state, fix each series' scale.

        Args:
            model: the forecaster; its backbone must stay the same object for the stream's life.
            context: one series or several series of any lengths; NaN = missing.
            context_length: steps of the context read, and steps kept for recomputation (default: the model's).
            max_drift: re-anchoring bound (see the module docstring); ``None`` keeps the opening scale forever.
            decoding: ``"masked"`` or ``"autoregressive"`` (default: the model's ``config.decoding``).
            cuda_graphs: replay one-patch updates of every series from a CUDA graph (see the module docstring).
        """
        if not isinstance(model, Forecaster):
            raise StreamError(f"model must be a tsfm Forecaster, got {type(model).__name__}")
        self.model = model
        self.config: ModelConfig = model.config
        self.context_length = _positive_int("context_length", context_length or self.config.context_length)
        if max_drift is not None and not (isinstance(max_drift, (int, float)) and max_drift > 1.0):
            raise StreamError(f"max_drift must be a number > 1 or None, got {max_drift!r}")
        self.max_drift = None if max_drift is None else float(max_drift)
        self.decoding = self.config.decoding if decoding is None else decoding
        if self.decoding not in DECODINGS:
            raise StreamError(f"decoding must be one of {', '.join(DECODINGS)}, got {self.decoding!r}")
        self.recompute = self.model.streams_recompute
        self._use_cuda_graphs(cuda_graphs)
        model.check_context_length(self.context_length)
        series = _as_series_list(context)
        tails = [
            torch.from_numpy(_check_context(s[-self.context_length :], f"context[{i}]", self.context_length)).float()
            for i, s in enumerate(series)
        ]
        self._open(tails)

    # ----------------------------------------------------------------------------------------------- public API
    @property
    def num_series(self) -> int:
        return len(self._tails)

    @property
    def buffered(self) -> list[int]:
        """Steps per series waiting for their patch to complete (0 .. patch_size - 1)."""
        return list(self._buffered)

    @torch.no_grad()
    def update(self, new_values: Any) -> None:
        """Append new steps: a list of ``B`` 1-D arrays of any lengths (empty allowed), or a ``[B, n]`` array.

        NaN marks a missing step; infinite values are refused. Completed patches advance the state; the rest is
        buffered. Series whose tail drifted past ``max_drift`` re-anchor.
        """
        values = self._parse_update(new_values)
        patch = self.config.patch_size
        advance: dict[int, list[int]] = {}  # patches to feed -> series
        for i, new in enumerate(values):
            if len(new) == 0:
                continue
            self._tails[i] = torch.cat([self._tails[i], new])  # cut back to context_length once fed
            total = self._buffered[i] + len(new)
            self._buffered[i] = total % patch
            if total // patch:
                advance.setdefault(total // patch, []).append(i)
        for count, index in advance.items():
            if not self.recompute:
                self._advance(index, count)
        self._tails = [tail[-self.context_length :] for tail in self._tails]
        completed = sorted(i for index in advance.values() for i in index)
        drifted = [i for i in completed if self._drifted(i)]
        if drifted:
            self._reanchor(drifted)

    @torch.no_grad()
    def forecast(
        self, prediction_length: int, quantile_levels: Sequence[float] | None = None,
        infer_nonnegative: bool | None = None, naive_blend: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(quantiles [B, H, len(levels)], median [B, H])`` like ``predict`` (``infer_nonnegative`` and
        ``naive_blend`` too); the carried state is untouched."""
        raw = self.forecast_model_quantiles(prediction_length, infer_nonnegative, naive_blend).cpu().numpy()
        raw = np.moveaxis(raw, 1, 2)
        levels = DEFAULT_QUANTILE_LEVELS if quantile_levels is None else tuple(float(q) for q in quantile_levels)
        if not levels or any(not 0.0 < q < 1.0 for q in levels):
            raise StreamError(f"quantile_levels must be levels in (0, 1), got {quantile_levels!r}")
        model_levels = tuple(float(q) for q in self.config.quantile_levels)
        median = interpolate_quantiles(raw, model_levels, (0.5,))[..., 0]
        return interpolate_quantiles(raw, model_levels, levels), median

    @torch.no_grad()
    def forecast_model_quantiles(self, prediction_length: int, infer_nonnegative: bool | None = None,
                                 naive_blend: str | None = None) -> torch.Tensor:
        """The model's own quantiles ``[B, Q, H]`` (what ``Forecaster.forecast`` returns), sorted along Q;
        ``infer_nonnegative`` and ``naive_blend`` override the config's, judged on the tail the stream keeps
        (``naive_blend="off"`` keeps a forecast to the carried state alone)."""
        prediction_length = _positive_int("prediction_length", prediction_length)
        if infer_nonnegative is not None and not isinstance(infer_nonnegative, bool):
            raise StreamError(f"infer_nonnegative must be True, False or None, got {infer_nonnegative!r}")
        if problem := naive_blend_problem(naive_blend, allow_none=True):
            raise StreamError(problem)
        if infer_nonnegative is None:
            infer_nonnegative = self.config.infer_nonnegative
        if naive_blend is None:
            naive_blend = self.config.naive_blend
        batch = self.num_series
        out = torch.empty(batch, len(self.config.quantile_levels), prediction_length, device=self.model.device)
        from_state = [i for i in range(batch) if not self.recompute and self._buffered[i] == 0]
        if from_state:
            index = torch.tensor(from_state, device=out.device)
            state = _take(self._state, index)
            scale = ScaleParams(self._loc[index], self._scale[index])
            out[index] = self._forecast_from_state(state, self._last[index], scale, prediction_length, from_state)
        done = set(from_state)
        rest = [i for i in range(batch) if i not in done]
        for width, index in _group_by_patches([len(self._tails[i]) for i in rest], rest, self.config.patch_size):
            context = self._stacked_tails(index, width).to(out.device)
            idx = torch.tensor(index, device=out.device)
            scale = ScaleParams(self._loc[idx], self._scale[idx])
            out[idx] = self.model.forecast(context, prediction_length, self.decoding, scale=scale,
                                           infer_nonnegative=False, naive_blend="off")
        if naive_blend != "off":  # predict's blend, backtested on the same window: the kept tail
            out = self._blend_with_seasonal_naive(out, naive_blend)
        if infer_nonnegative:  # predict's rule on the same window: the tail the stream keeps
            nonnegative = torch.stack([has_no_negative_value(tail) for tail in self._tails]).to(out.device)
            out = clamp_if_nonnegative(out, nonnegative)
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Everything needed to resume, as a flat ``{name: tensor}`` dict (``safetensors.torch.save_file`` takes it
        as is); the metadata travels as a JSON string in the uint8 tensor ``"meta"``."""
        meta = {
            "format_version": FORMAT_VERSION,
            "model_config": self.config.to_dict(),
            "context_length": self.context_length,
            "max_drift": self.max_drift,
            "decoding": self.decoding,
            "buffered": self._buffered,
            "reanchors": self.reanchors,
        }
        out = {
            "meta": torch.frombuffer(bytearray(json.dumps(meta).encode()), dtype=torch.uint8).clone(),
            "tail_values": torch.cat(self._tails).cpu(),
            "tail_lengths": torch.tensor([len(t) for t in self._tails], dtype=torch.int64),
            "loc": self._loc.cpu(),
            "scale": self._scale.cpu(),
        }
        if not self.recompute:
            out["last"] = self._last.cpu()
            for k, leaf in enumerate(pytree.tree_leaves(self._state)):
                out[f"state.{k}"] = leaf.contiguous().cpu()
        return out

    @classmethod
    def from_state_dict(cls, model: Forecaster, tensors: dict[str, torch.Tensor], *,
                        cuda_graphs: bool = False) -> Stream:
        """Rebuild a stream saved by :meth:`state_dict` for the same model (its config must match); ``cuda_graphs``
        as for a new stream (a graph is not part of a snapshot)."""
        if "meta" not in tensors:
            raise StreamError("stream state_dict has no 'meta' entry: not a tsfm stream snapshot")
        meta = json.loads(bytes(tensors["meta"].tolist()).decode())
        if meta.get("format_version") != FORMAT_VERSION:
            raise StreamError(f"stream snapshot format_version {meta.get('format_version')} != {FORMAT_VERSION}")
        try:  # fields added to ModelConfig since the snapshot read as their defaults
            saved = ModelConfig.from_dict(meta["model_config"])
        except (TypeError, ValueError) as err:
            raise StreamError(f"stream snapshot holds an unreadable model config: {err}") from None
        if not saved.same_network(model.config):  # inference settings (decoding, clamp) may differ
            raise StreamError("stream snapshot was made with a different model config than the model given")
        self = cls.__new__(cls)
        self.model, self.config = model, model.config
        self.context_length, self.max_drift, self.decoding = meta["context_length"], meta["max_drift"], meta["decoding"]
        self.recompute = model.streams_recompute
        if not self.recompute and "last" not in tensors:
            raise StreamError("stream snapshot carries no state (its model re-read the tail: flip_equivariant on); "
                              "restore it with a model whose flip_equivariant is on, as it was saved")
        self._use_cuda_graphs(cuda_graphs)
        device = model.device
        lengths = tensors["tail_lengths"].tolist()
        self._tails = list(torch.split(tensors["tail_values"].float(), lengths))
        self._buffered, self.reanchors = list(meta["buffered"]), list(meta["reanchors"])
        self._loc, self._scale = tensors["loc"].to(device), tensors["scale"].to(device)
        if self.recompute:
            self._state, self._last = None, None
            return self
        template = model.backbone.init_state(len(lengths), device=device, dtype=torch.float32)
        leaves, spec = pytree.tree_flatten(template)
        loaded = []
        for k, leaf in enumerate(leaves):
            saved = tensors.get(f"state.{k}")
            if saved is None or saved.shape != leaf.shape:
                got = None if saved is None else tuple(saved.shape)
                raise StreamError(f"stream snapshot state.{k}: expected shape {tuple(leaf.shape)}, got {got}")
            loaded.append(saved.to(device, leaf.dtype))
        self._state = pytree.tree_unflatten(loaded, spec)
        self._last = tensors["last"].to(device)
        return self

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`state_dict` to a safetensors file."""
        from safetensors.torch import save_file

        save_file(self.state_dict(), os.fspath(path))

    @classmethod
    def load(cls, model: Forecaster, path: str | os.PathLike[str], *, cuda_graphs: bool = False) -> Stream:
        """Read a stream written by :meth:`save`."""
        from safetensors.torch import load_file

        return cls.from_state_dict(model, load_file(os.fspath(path)), cuda_graphs=cuda_graphs)

    # ----------------------------------------------------------------------------------------------- internals
    def _use_cuda_graphs(self, wanted: bool) -> None:
        self.cuda_graphs, self._graphed = bool(wanted), None
        if not self.cuda_graphs:
            return
        if self.recompute:
            raise StreamError("cuda_graphs: this stream re-reads its tail for every forecast (a Transformer, or "
                              "flip_equivariant on) and keeps no fixed-size state to capture")
        try:
            graphed_step.require_cuda(self.model.device)
        except ValueError as err:
            raise StreamError(f"cuda_graphs: {err}") from None

    def _open(self, tails: list[torch.Tensor]) -> None:
        batch, device = len(tails), self.model.device
        self._tails = tails
        self._buffered = [0] * batch
        self.reanchors = [0] * batch
        self._loc = torch.zeros(batch, 1, device=device)
        self._scale = torch.ones(batch, 1, device=device)
        if self.recompute:
            self._state, self._last = None, None
        else:
            self._state = self.model.backbone.init_state(batch, device=device, dtype=torch.float32)
            self._last = torch.zeros(batch, self.config.d_model, device=device)
        self._prefill(list(range(batch)))

    @torch.no_grad()
    def _prefill(self, index: list[int]) -> None:
        """Fit the scale on each listed series' tail (without its buffered steps) and recompute its state."""
        patch = self.config.patch_size
        ends = {i: len(self._tails[i]) - self._buffered[i] for i in index}
        for width, group in _group_by_patches([ends[i] for i in index], index, patch):
            context = torch.stack([_left_pad(self._tails[i][: ends[i]], width) for i in group]).to(self.model.device)
            idx = torch.tensor(group, device=self.model.device)
            scale = self.model.fit_scale(context)
            self._loc[idx], self._scale[idx] = scale.loc, scale.scale
            if self.recompute:
                continue
            self._last[idx], state = self.model.read_context(context, scale)
            self._state = _put(self._state, idx, state)

    def _advance(self, index: list[int], count: int) -> None:
        """Feed the last ``count`` complete patches of the listed series into the carried state."""
        patch = self.config.patch_size
        rows = []
        for i in index:
            end = len(self._tails[i]) - self._buffered[i]
            rows.append(self._tails[i][end - count * patch : end])
        idx = torch.tensor(index, device=self.model.device)
        raw = torch.stack(rows).to(self.model.device)
        scaled = apply_scale(raw, ScaleParams(self._loc[idx], self._scale[idx]))
        if self.cuda_graphs and count == 1 and len(index) == len(self._tails):  # every series, in order
            if self._graphed is None:
                self._graphed = graphed_step.GraphedPatchStep(self.model, self._state)
            # the state returned is the graph's buffers: safe to keep, as nothing writes a stream's state in place
            self._last, self._state = self._graphed(scaled, self._state)
            return
        tokens = self.model.embed(patch_tokens(scaled.reshape(len(index), count, patch)))
        hidden, state = self.model.continue_state(tokens, _take(self._state, idx))
        self._last[idx] = hidden[:, -1]
        self._state = _put(self._state, idx, state)

    def _drifted(self, i: int) -> bool:
        if self.max_drift is None:
            return False
        tail = self.model.fit_scale(self._tails[i][None].to(self._loc.device))
        loc, scale = self._loc[i, 0], self._scale[i, 0]
        ratio = float(tail.scale[0, 0] / scale)
        moved = float((tail.loc[0, 0] - loc).abs() / scale)
        return ratio > self.max_drift or ratio < 1.0 / self.max_drift or moved > self.max_drift

    def _reanchor(self, index: list[int]) -> None:
        for i in index:
            self.reanchors[i] += 1
        self._prefill(index)

    def _forecast_from_state(
        self, state: Any, last: torch.Tensor, scale: ScaleParams, prediction_length: int, index: list[int]
    ) -> torch.Tensor:
        """Masked (and, if asked, autoregressive) decoding from the carried state, which is not written
        (``Forecaster.decode_from_state`` with the stream's fixed scale: nothing is re-read). A model with the
        seasonal hint or gate reads Seasonal Naive from the listed series' kept tails, which end where their state
        does."""
        hint_context = None
        if self.model.reads_seasonal_naive:
            hint_context = self._stacked_tails(index, max(len(self._tails[i]) for i in index)).to(last.device)
        return self.model.decode_from_state(last, state, scale, prediction_length, self.decoding,
                                            hint_context=hint_context)

    def _blend_with_seasonal_naive(self, out: torch.Tensor, how: str) -> torch.Tensor:
        """``out [B, Q, H]`` moved towards Seasonal Naive as ``Forecaster.forecast`` moves it
        (``how``: a ``ModelConfig.naive_blend`` value, :mod:`tsfm.naive_blend`), each series judged on the tail the
        stream keeps: the backtest re-reads that tail, so a stream with the blend on costs a context read per
        forecast."""
        blended = out.clone()
        for width, index in _group_by_patches([len(tail) for tail in self._tails], list(range(self.num_series)),
                                              self.config.patch_size):
            idx = torch.tensor(index, device=out.device)
            context = self._stacked_tails(index, width).to(out.device)
            blended[idx] = self.model.blend_with_seasonal_naive(context, out[idx], self.decoding, how,
                                                                self.config.flip_equivariant)
        return blended

    def _stacked_tails(self, index: list[int], width: int) -> torch.Tensor:
        """``[len(index), width]``: the listed series' kept tails, left-padded with NaN."""
        return torch.stack([_left_pad(self._tails[i], width) for i in index])

    def _parse_update(self, new_values: Any) -> list[torch.Tensor]:
        if isinstance(new_values, torch.Tensor):
            new_values = new_values.detach().to("cpu", torch.float64).numpy()
        if isinstance(new_values, np.ndarray) and new_values.dtype != object:
            if new_values.ndim != 2:
                raise StreamError(f"new_values as an array must be [num_series, n], got shape {new_values.shape}")
            rows = list(new_values)
        elif isinstance(new_values, (list, tuple)):
            rows = list(new_values)
        else:
            raise StreamError(
                f"new_values must be a list of 1-D arrays or a [num_series, n] array, got {type(new_values).__name__}"
            )
        if len(rows) != self.num_series:
            raise StreamError(f"new_values has {len(rows)} series, the stream has {self.num_series}")
        out = []
        for i, row in enumerate(rows):
            array = _as_1d(row, f"new_values[{i}]")
            if np.isinf(array).any():
                raise StreamError(f"new_values[{i}] has infinite values; use NaN for missing values")
            out.append(torch.from_numpy(array).float())
        return out


def open_stream(
    model: Forecaster,
    context: Any,
    *,
    context_length: int | None = None,
    max_drift: float | None = DEFAULT_MAX_DRIFT,
    decoding: str | None = None,
    cuda_graphs: bool = False,
) -> Stream:
    """Open a :class:`Stream` (the module docstring says how scale, partial patches and the Transformer behave)."""
    return Stream(model, context, context_length=context_length, max_drift=max_drift, decoding=decoding,
                  cuda_graphs=cuda_graphs)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise StreamError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _left_pad(values: torch.Tensor, width: int) -> torch.Tensor:
    return torch.cat([values.new_full((width - len(values),), float("nan")), values])


def _group_by_patches(lengths: list[int], index: list[int], patch: int) -> list[tuple[int, list[int]]]:
    """Series grouped by length in whole patches (padding must never depend on other series, as in ``predict``),
    each group cut into passes of at most :data:`TAIL_BATCH` series."""
    groups: dict[int, list[int]] = {}
    for length, i in zip(lengths, index, strict=True):
        groups.setdefault(math.ceil(length / patch) * patch, []).append(i)
    return [(width, group[k : k + TAIL_BATCH]) for width, group in sorted(groups.items())
            for k in range(0, len(group), TAIL_BATCH)]


def _covers_all(state: Any, index: torch.Tensor) -> bool:
    """Whether ``index`` is every row in order (then no copy is needed: ``step`` and ``forward`` never write the
    state they are given, which ``test_forecast_does_not_disturb_state`` checks for every backbone)."""
    batch = pytree.tree_leaves(state)[0].shape[0]
    return len(index) == batch and bool((index == torch.arange(batch, device=index.device)).all())


def _take(state: Any, index: torch.Tensor) -> Any:
    """The listed series' rows of a batched state (the state itself when that is all of it)."""
    if _covers_all(state, index):
        return state
    return pytree.tree_map(lambda t: t[index], state)


def _put(state: Any, index: torch.Tensor, rows: Any) -> Any:
    """``state`` with the listed series' rows replaced by ``rows`` (a new nest; the old tensors are not written)."""
    if _covers_all(state, index):
        return pytree.tree_map(lambda full, part: part.to(full.dtype), state, rows)

    def put(full: torch.Tensor, part: torch.Tensor) -> torch.Tensor:
        out = full.clone()
        out[index] = part.to(full.dtype)
        return out

    return pytree.tree_map(put, state, rows)


__all__ = ["DEFAULT_MAX_DRIFT", "Stream", "StreamError", "open_stream"]
