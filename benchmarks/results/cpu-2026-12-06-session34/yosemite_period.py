"""How far the detected period's Seasonal Naive (the blend's target) is from the benchmark's own (period 288 for
``5T``) on ``yosemite_temps/5T`` medium/long, windows before the test windows (spans back 2 and 3), no model run:

    cd /work/main && PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2026-12-06-session34/yosemite_period.py \
        --benchmark data/benchmark
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from tsfm.pipelines.data.gift_eval import GiftEvalDataset
from tsfm.seasonality import detect_period, seasonal_naive_hint

CONTEXT = 2048


def yosemite_windows(benchmark: Path, length: int) -> Iterator[tuple[str, int, int, torch.Tensor, torch.Tensor, int]]:
    """``(term, spans back, window, context [1, <= length], truth [H], season length)`` of every
    ``yosemite_temps/5T`` medium and long window before the test windows (spans back 2 and 3)."""
    for term in ("medium", "long"):
        dataset = GiftEvalDataset.per_variate("yosemite_temps/5T", term, root=benchmark)
        for spans in (2, 3):
            for window, (inp, label) in enumerate(dataset.rolling_windows(spans)):
                context = torch.tensor(np.asarray(inp["target"], dtype=np.float32)[-length:])[None]
                truth = torch.tensor(np.asarray(label["target"], dtype=np.float32))
                yield term, spans, window, context, truth, dataset.season_length


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    args = parser.parse_args()
    for term, spans, window, context, truth, season in yosemite_windows(args.benchmark, CONTEXT):
        horizon = truth.shape[0]
        period = detect_period(context)
        detected = seasonal_naive_hint(context, period, horizon)[0]
        daily = seasonal_naive_hint(context, torch.tensor([season]), horizon)[0]
        mse = [float(((x - truth) ** 2).nanmean()) for x in (detected, daily)]
        mae = [float((x - truth).abs().nanmean()) for x in (detected, daily)]
        print(f"{term} spans_back {spans} window {window}: period {int(period[0])} (benchmark {season}); "
              f"SN(detected) / SN(benchmark) MAE {mae[0] / mae[1]:.3f} MSE {mse[0] / mse[1]:.3f}")


if __name__ == "__main__":
    main()
