"""Prototype, not shipped code: the forecast's spread scaled by what the Seasonal-Naive blend's backtest says of it.

The shipped blend (``tsfm.naive_blend``, ``inverse_mse``) forecasts the context's last ``h`` steps from the steps
before them and uses only the median of that backtest, to weigh Seasonal Naive. The backtest's quantiles also say
whether the model's spread suits the series: here every quantile of the blended backtest is scaled about its median
by the factor ``s`` (a grid from 0.5 to 2) with the lowest pinball loss on the held-out steps, and the real forecast's
quantiles are scaled by the same ``s`` about its (blended) median. Medians, and so MASE, are unchanged; series the
blend does not backtest (no season, too short) are left as shipped. Judged like ``two_origin_prototype.py``:

    PYTHONPATH=.:scripts:benchmarks/results/cpu-2026-12-06-session27 python \
        benchmarks/results/cpu-2026-12-06-session33/spread_prototype.py \
        --judge benchmarks/results/cpu-2026-12-06-session27/judge --reference-name tf10-cont2 \
        --benchmark data/benchmark --real-data data/device/pretrain --out OUT
"""

from __future__ import annotations

import math

import torch
from two_origin_prototype import judge_arguments, judge_blend

import tsfm.model
from tsfm.naive_blend import backtestable, blend_with_seasonal_naive, naive_weight
from tsfm.seasonality import detect_period, seasonal_naive_hint

SCALES = torch.exp(torch.linspace(math.log(0.5), math.log(2.0), 13))


def _scaled(quantiles: torch.Tensor, scale: torch.Tensor, median: int) -> torch.Tensor:
    centre = quantiles[:, median : median + 1]
    return centre + scale.reshape(-1, *([1] * (quantiles.dim() - 1))) * (quantiles - centre)


def best_scale(quantiles: torch.Tensor, truth: torch.Tensor, levels: torch.Tensor, median: int) -> torch.Tensor:
    """``[R]``: the grid's spread factor with the lowest pinball loss of ``quantiles [R, Q, h]`` on ``truth [R, h]``."""
    observed = ~torch.isnan(truth)
    losses = []
    for s in SCALES:
        error = torch.nan_to_num(truth)[:, None] - _scaled(quantiles, s.expand(len(truth)), median)
        pinball = torch.maximum(levels[None, :, None] * error, (levels[None, :, None] - 1) * error)
        losses.append(torch.where(observed[:, None], pinball, 0.0).sum((1, 2)))
    return SCALES[torch.stack(losses, 1).argmin(1)]


def calibrated_blend(self, context, quantiles, decoding, how):
    """``Forecaster.blend_with_seasonal_naive`` as shipped, then the spread scaled by the backtest's best factor."""
    median = self._median_index
    kept = {}

    def backtest(history: torch.Tensor, horizon: int) -> torch.Tensor:  # the shipped backtest, its quantiles kept
        kept["history"] = history
        kept["quantiles"] = self.forecast(history, horizon, decoding, infer_nonnegative=False, naive_blend="off")
        return kept["quantiles"][:, median]

    out = blend_with_seasonal_naive(context, quantiles, median, how, backtest)
    if not kept:  # off, or no series backtested
        return out
    history, backtest_quantiles = kept["history"], kept["quantiles"]
    horizon = backtest_quantiles.shape[2]
    period = detect_period(context)
    rows = torch.nonzero(backtestable(context[:, :-horizon], period)).flatten()  # the rows the blend backtested
    weight = naive_weight(context[rows], period[rows], backtest_quantiles[:, median], how)
    naive = seasonal_naive_hint(history, period[rows], horizon)
    blended = backtest_quantiles + (torch.nan_to_num(naive - backtest_quantiles[:, median]) * weight[:, None])[:, None]
    levels = torch.tensor(self.quantile_levels, dtype=quantiles.dtype)
    out[rows] = _scaled(out[rows], best_scale(blended, context[rows, -horizon:], levels, median), median)
    return out


def main() -> None:
    args = judge_arguments(__doc__.splitlines()[0]).parse_args()
    tsfm.model.Forecaster.blend_with_seasonal_naive = calibrated_blend
    judge_blend(args, blend_with_seasonal_naive, "spread")


if __name__ == "__main__":
    main()
