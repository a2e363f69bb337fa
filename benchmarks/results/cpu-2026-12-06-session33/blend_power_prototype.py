"""Prototype, not shipped code: the Seasonal-Naive blend's weight from backtest errors raised to a higher power.

The shipped weight (``inverse_mse``) is ``e_model / (e_model + e_naive)`` with squared backtest errors; with absolute
errors (``inverse_mae``, power 1) the benchmark's windows before its test windows scored 1.1% worse, and with a
switch (power infinite) worse again (``benchmarks/RESULTS.md``, twenty-fourth and twenty-fifth sessions). Where a
clean daily cycle makes Seasonal Naive near-exact (``yosemite_temps/5T``), the squared weight still leaves the model
a third of the forecast. This tries the powers between: the mean of ``|error| ** POWER`` per forecast. Everything
else is the shipped blend; judged like ``two_origin_prototype.py`` (whose :func:`judge_blend` it uses):

    PYTHONPATH=.:scripts:benchmarks/results/cpu-2026-12-06-session27 python \
        benchmarks/results/cpu-2026-12-06-session33/blend_power_prototype.py --power 4 \
        --judge benchmarks/results/cpu-2026-12-06-session27/judge --reference-name tf10-cont2 \
        --benchmark data/benchmark --real-data data/device/pretrain --out OUT
"""

from __future__ import annotations

import torch
from two_origin_prototype import judge_arguments, judge_blend

import tsfm.naive_blend
from tsfm.seasonality import seasonal_naive_hint

SHIPPED_WEIGHT = tsfm.naive_blend.naive_weight


def weight_with_power(power: float):
    """``naive_weight`` with ``inverse_mse`` read as errors to ``power``; the other rules as shipped."""

    def naive_weight(context, period, backtest_median, how):
        if how != "inverse_mse":
            return SHIPPED_WEIGHT(context, period, backtest_median, how)
        horizon = backtest_median.shape[1]
        history, truth = context[:, :-horizon], context[:, -horizon:]
        naive = seasonal_naive_hint(history, period, horizon)
        observed = ~torch.isnan(truth) & ~torch.isnan(naive)
        count = observed.sum(1).clamp(min=1)
        # errors scaled by the series' own backtest spread first, so a high power cannot overflow float32
        scale = torch.where(observed, (naive - truth).abs() + (backtest_median - truth).abs(), 0.0).amax(1)
        scale = scale.clamp(min=torch.finfo(context.dtype).tiny)[:, None]
        model = torch.where(observed, ((backtest_median - truth).abs() / scale) ** power, 0.0).sum(1) / count
        naive_error = torch.where(observed, ((naive - truth).abs() / scale) ** power, 0.0).sum(1) / count
        usable = tsfm.naive_blend.backtestable(history, period) & (observed.sum(1) > 0)
        total = model + naive_error
        weight = torch.where(total > 0, model / total.clamp(min=torch.finfo(total.dtype).tiny), 0.0)
        return torch.where(usable, weight, 0.0)

    return naive_weight


def main() -> None:
    parser = judge_arguments(__doc__.splitlines()[0])
    parser.add_argument("--power", type=float, required=True, help="the power of the backtest errors (shipped: 2)")
    args = parser.parse_args()
    tsfm.naive_blend.naive_weight = weight_with_power(args.power)
    judge_blend(args, tsfm.naive_blend.blend_with_seasonal_naive, f"power-{args.power:g}")


if __name__ == "__main__":
    main()
