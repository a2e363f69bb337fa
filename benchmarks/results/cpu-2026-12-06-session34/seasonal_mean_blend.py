"""Prototype, not shipped code: the blend's partner as the mean of the last ``K`` seasons instead of the last one.

Seasonal Naive copies one period, with that period's weather and glitches (a sensor's dropped hour on
``yosemite_temps/5T``); the mean of the last ``K`` periods keeps the cycle and averages the day-to-day noise away. The
shipped blend (``tsfm.naive_blend``) uses Seasonal Naive in its backtest and as the target it moves towards; here
both read the ``K``-season mean where the context holds ``K`` whole periods (fewer where it holds fewer). Judged as
the other blend probes (``cpu-2026-12-06-session27/two_origin_prototype.py``'s ``judge_blend``), against the shipped
blend as judged there (before this session's period refinement, which this run includes):

    PYTHONPATH=.:scripts:benchmarks/results/cpu-2026-12-06-session27 python \
        benchmarks/results/cpu-2026-12-06-session34/seasonal_mean_blend.py --seasons 2 [--last-level] \
        --judge benchmarks/results/cpu-2026-12-06-session27/judge --reference-name tf10-cont2 \
        --benchmark data/benchmark --real-data data/device/pretrain --out OUT
"""

from __future__ import annotations

import torch
from two_origin_prototype import judge_arguments, judge_blend

import tsfm.naive_blend


def seasonal_mean(seasons: int, last_level: bool = False):
    """``seasonal_naive_hint`` replaced by the NaN-aware mean of the last ``seasons`` periods' values; with
    ``last_level`` shifted to the last period's own level (the shape averaged, the level Seasonal Naive's)."""

    def hint(context: torch.Tensor, period: torch.Tensor, horizon: int) -> torch.Tensor:
        length = context.shape[1]
        steps = torch.arange(horizon, device=context.device)[None]
        safe = period.clamp(min=1)[:, None]
        copies = []
        for back in range(1, seasons + 1):
            start = length - back * safe
            index = (start + steps % safe).clamp(0, length - 1)
            copy = torch.gather(context, 1, index)
            copies.append(torch.where(start >= 0, copy, torch.full_like(copy, float("nan"))))
        stacked = torch.stack(copies)
        mean = stacked.nanmean(0)
        if last_level:
            mean = mean + (stacked[0].nanmean(1, keepdim=True) - mean.nanmean(1, keepdim=True))
        return torch.where(period[:, None] > 0, mean, torch.full_like(mean, float("nan")))

    return hint


def main() -> None:
    parser = judge_arguments(__doc__.splitlines()[0])
    parser.add_argument("--seasons", type=int, required=True, help="how many of the last periods to average")
    parser.add_argument("--last-level", action="store_true", help="keep the last period's level")
    args = parser.parse_args()
    tsfm.naive_blend.seasonal_naive_hint = seasonal_mean(args.seasons, args.last_level)
    name = f"seasons-{args.seasons}" + ("-last-level" if args.last_level else "")
    judge_blend(args, tsfm.naive_blend.blend_with_seasonal_naive, name)


if __name__ == "__main__":
    main()
