"""The shipped blend with every quantile's distance from the median scaled by ``--spread`` afterwards, judged by
``two_origin_prototype.judge_blend`` on the windows before the test windows (paired against the twenty-seventh
session's reference, as the shipped inference, ``period-comb`` of the thirty-fourth session, was; README.md here):

    PYTHONPATH=.:scripts:benchmarks/results/cpu-2026-12-06-session27 python \
        benchmarks/results/cpu-2026-12-06-session35/spread_blend.py --spread 1.1 \
        --judge benchmarks/results/cpu-2026-12-06-session27/judge --reference-name tf10-cont2 \
        --benchmark data/benchmark --real-data data/device/pretrain --out OUT
"""

from __future__ import annotations

import functools

import torch
from two_origin_prototype import judge_arguments, judge_blend

from tsfm.naive_blend import blend_with_seasonal_naive


def spread_blend(context: torch.Tensor, quantiles: torch.Tensor, median_index: int, how: str, backtest,
                 *, spread: float) -> torch.Tensor:
    """The shipped blend, then each level moved ``spread`` times as far from the median (1: unchanged)."""
    blended = blend_with_seasonal_naive(context, quantiles, median_index, how, backtest)
    median = blended[:, median_index : median_index + 1]
    return median + spread * (blended - median)


if __name__ == "__main__":
    parser = judge_arguments(__doc__.splitlines()[0])
    parser.add_argument("--spread", type=float, required=True)
    args = parser.parse_args()
    judge_blend(args, functools.partial(spread_blend, spread=args.spread), f"spread-{args.spread:g}")
