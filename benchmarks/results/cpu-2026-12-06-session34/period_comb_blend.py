"""The shipped blend with the period refined by its multiples (``tsfm.seasonality.detect_period`` as of this
session), judged against the shipped blend with the earlier period (the reference judged in the twenty-seventh
session) by ``two_origin_prototype.judge_blend``:

    PYTHONPATH=.:scripts:benchmarks/results/cpu-2026-12-06-session27 python \
        benchmarks/results/cpu-2026-12-06-session34/period_comb_blend.py \
        --judge benchmarks/results/cpu-2026-12-06-session27/judge --reference-name tf10-cont2 \
        --benchmark data/benchmark --real-data data/device/pretrain --out OUT
"""

from __future__ import annotations

from two_origin_prototype import judge_arguments, judge_blend

from tsfm.naive_blend import blend_with_seasonal_naive

if __name__ == "__main__":
    judge_blend(judge_arguments(__doc__.splitlines()[0]).parse_args(), blend_with_seasonal_naive, "period-comb")
