"""Prototype, not shipped code: the Seasonal-Naive blend with Naive (the last value) where no season is found.

The shipped blend (``tsfm.naive_blend``) backtests only series with a detected season, so a series without one is
left as the model forecast it, even where the last value forecasts it better (``exchange_rate/D``, a random walk: the
default is at 1.14 x Naive there). Here a series with no season is blended towards Naive by the same backtest and
weight (Seasonal Naive with a period of one step is Naive). Everything else is the shipped blend; judged like
``two_origin_prototype.py``:

    PYTHONPATH=.:scripts:benchmarks/results/cpu-2026-12-06-session27 python \
        benchmarks/results/cpu-2026-12-06-session33/naive_fallback_prototype.py \
        --judge benchmarks/results/cpu-2026-12-06-session27/judge --reference-name tf10-cont2 \
        --benchmark data/benchmark --real-data data/device/pretrain --out OUT
"""

from __future__ import annotations

import torch
from two_origin_prototype import judge_arguments, judge_blend

import tsfm.naive_blend
from tsfm.seasonality import detect_period


def period_or_one_step(context: torch.Tensor) -> torch.Tensor:
    """The detected period, and 1 (Naive) where none is found."""
    period = detect_period(context)
    return torch.where(period > 0, period, torch.ones_like(period))


def main() -> None:
    args = judge_arguments(__doc__.splitlines()[0]).parse_args()
    tsfm.naive_blend.detect_period = period_or_one_step
    judge_blend(args, tsfm.naive_blend.blend_with_seasonal_naive, "naive-fallback")


if __name__ == "__main__":
    main()
