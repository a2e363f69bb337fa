"""Quantile head and pinball loss (DESIGN §2.4-2.5).

The head predicts, for every token, ``Q`` quantiles of each of the ``P`` steps of the next patch. Quantiles are
left unsorted in training (the pinball loss needs no order) and sorted at inference so they never cross.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from tsfm.mlp import ResidualMLP


class QuantileHead(nn.Module):
    """``[B, N, d_model] -> [B, N, Q, P]``: quantiles of the patch after each token."""

    def __init__(self, d_model: int, hidden_dim: int, num_quantiles: int, patch_size: int) -> None:
        super().__init__()
        self.num_quantiles = num_quantiles
        self.patch_size = patch_size
        self.mlp = ResidualMLP(d_model, hidden_dim, num_quantiles * patch_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        out = self.mlp(hidden)
        return out.reshape(*hidden.shape[:-1], self.num_quantiles, self.patch_size)


def pinball_loss(prediction: torch.Tensor, target: torch.Tensor, quantile_levels: Sequence[float]) -> torch.Tensor:
    """Mean quantile loss over every step that has a target (NaN targets are skipped).

    Args:
        prediction: ``[..., Q, S]`` quantile predictions.
        target: ``[..., S]`` true values, NaN where there is nothing to predict.
        quantile_levels: the ``Q`` levels, in the order of ``prediction``'s quantile axis.
    Returns:
        A scalar: the pinball loss averaged over levels and over observed steps (0 when nothing is observed,
        keeping the graph so a batch without targets does not break training).
    """
    loss, weight = pinball_per_step(prediction, target, quantile_levels)
    return loss.sum() / weight.sum().clamp(min=1.0)


def balanced_pinball_loss(prediction: torch.Tensor, target: torch.Tensor, quantile_levels: Sequence[float],
                          balance: float) -> torch.Tensor:
    """Mean over windows of ``log(window's pinball loss + balance)``: every window counts by its relative error.

    :func:`pinball_loss` pools the steps of a batch, so a window counts by its error in its own scale, and a few
    windows the model cannot forecast (a level shift after the context, a mixture whose scale the context misses)
    carry much of a batch's loss: on the default's training windows the top 5% carry 59% of it, the mean window loss
    is three times the median one and the largest sixty times the mean
    (``benchmarks/results/cpu-2026-12-07-session38/window_losses.py``). The benchmark scores each configuration by a
    ratio to Seasonal Naive and pools configurations by a geometric mean, so a 1% better forecast of a smooth series
    counts as much as one of a noisy series. The logarithm gives each window the gradient of its relative error,
    ``grad / (loss + balance)``; ``balance`` (> 0, in the scaled units of the loss) bounds the weight of
    near-perfect windows (an exactly repeated profile). Tried on the default (``benchmarks/RESULTS.md``, session
    38): level with the pooled loss on the benchmark, better on hourly data, worse on 5-minute data; not shipped.

    Args:
        prediction: ``[B, ..., Q, S]`` quantile predictions, the first axis the windows.
        target: ``[B, ..., S]`` true values, NaN where there is nothing to predict.
        quantile_levels: the ``Q`` levels.
        balance: the floor added to each window's loss before the logarithm.
    Returns:
        A scalar: the mean over windows with a target (0, keeping the graph, when no window has one).
    """
    loss, weight = pinball_per_step(prediction, target, quantile_levels)
    dims = tuple(range(1, loss.dim()))
    count = weight.sum(dims)
    scored = count > 0
    per_window = loss.sum(dims) / count.clamp(min=1.0)
    return torch.where(scored, torch.log(per_window + balance), 0.0).sum() / scored.sum().clamp(min=1)


def quantile_match_loss(prediction: torch.Tensor, reference: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference between two sets of quantile predictions (``[..., Q, S]`` each), over levels and
    over the steps that have a target (``[..., S]``, NaN elsewhere): the distillation term of a student fitting a
    teacher's forecast distributions. Averaged over evenly spaced levels it approximates the 1-Wasserstein distance
    between the two distributions, so it compares whole forecasts, not only their medians."""
    observed = (~torch.isnan(target)).to(prediction.dtype)
    distance = (prediction - reference).abs().mean(dim=-2)
    return (distance * observed).sum() / observed.sum().clamp(min=1.0)


def pinball_per_step(prediction: torch.Tensor, target: torch.Tensor, quantile_levels: Sequence[float]
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """The terms :func:`pinball_loss` averages: ``[..., S]`` loss of each step (mean over levels, 0 where the target
    is NaN) and ``[..., S]`` its weight (1 observed, 0 not), so callers can pool them over any groups of rows."""
    levels = torch.as_tensor(quantile_levels, dtype=prediction.dtype, device=prediction.device)
    levels = levels.reshape(-1, 1)
    observed = ~torch.isnan(target)
    filled = torch.where(observed, target, torch.zeros_like(target)).unsqueeze(-2)
    error = filled - prediction
    loss = torch.maximum(levels * error, (levels - 1) * error).mean(dim=-2)
    weight = observed.to(loss.dtype)
    return loss * weight, weight
