"""NaN-aware per-series standard scaling (DESIGN §2.1).

Every series is brought to zero mean and unit spread over its *observed* context, so one model serves series of any
magnitude; forecasts are mapped back with the same ``loc`` and ``scale``. Missing values (NaN) are ignored, never
imputed here: the patch tokens carry an observed-mask for that.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

SCALE_EPS = 1e-5


class ScaleParams(NamedTuple):
    """Per-series location and scale, each ``[B, 1]``, broadcastable over time."""

    loc: torch.Tensor
    scale: torch.Tensor


def fit_scale(context: torch.Tensor, loc_steps: int | None = None) -> ScaleParams:
    """Fit ``loc = nanmean`` and ``scale = nanstd`` (population) over the last axis of ``context [B, T]``.

    A constant series gets ``scale = |loc| + 1e-5`` so it maps to values near one instead of dividing by zero;
    an all-NaN series gets ``loc = 0, scale = 1`` so it passes through unchanged.

    ``loc_steps`` moves the centre to the recent level: ``loc`` is the mean of the last ``loc_steps`` observed values
    (the whole-context mean where none of them is observed), while ``scale`` stays the whole context's spread. A
    model centred on the whole context's mean shrinks an unsure forecast toward the context's *earlier* level
    (``ModelConfig.scale_loc_steps``; ``benchmarks/RESULTS.md``, the centring probe).
    """
    if loc_steps is not None:
        whole, tail = fit_scale(context), context[..., -loc_steps:]
        seen = (~torch.isnan(tail)).any(dim=-1, keepdim=True)
        return ScaleParams(torch.where(seen, fit_scale(tail).loc, whole.loc), whole.scale)
    observed = ~torch.isnan(context)
    count = observed.sum(dim=-1, keepdim=True)
    filled = torch.where(observed, context, torch.zeros_like(context))
    loc = filled.sum(dim=-1, keepdim=True) / count.clamp(min=1)
    centred = torch.where(observed, context - loc, torch.zeros_like(context))
    scale = (centred.square().sum(dim=-1, keepdim=True) / count.clamp(min=1)).sqrt()
    scale = torch.where(scale == 0, loc.abs() + SCALE_EPS, scale)
    empty = count == 0
    loc = torch.where(empty, torch.zeros_like(loc), loc)
    scale = torch.where(empty, torch.ones_like(scale), scale)
    return ScaleParams(loc, scale)


def apply_scale(values: torch.Tensor, params: ScaleParams) -> torch.Tensor:
    """Map raw values ``[B, T]`` into the model's scaled space (NaN stays NaN)."""
    return (values - params.loc) / params.scale


def invert_scale(values: torch.Tensor, params: ScaleParams) -> torch.Tensor:
    """Map scaled values back to the series' units. ``values`` is ``[B, ...]``; loc/scale broadcast over the rest."""
    shape = (values.shape[0],) + (1,) * (values.dim() - 1)
    return values * params.scale.reshape(shape) + params.loc.reshape(shape)
