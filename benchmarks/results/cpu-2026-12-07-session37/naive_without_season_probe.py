"""Should the blend lean towards the naive forecast where the context shows no season? Today a series whose period
:func:`tsfm.seasonality.detect_period` reads as 0 is left as the model forecast it; GIFT-Eval's Seasonal Naive at such
frequencies (D, W, A) is the naive forecast, its season being 1. This probe scores the shipped default with period 0
read as 1 inside the blend only, on the windows before the test windows (spans back 2 and 3, as the judge), and pairs
it with the judge's own reference scores of the unchanged default on the same windows:

    cd /work/main && PYTHONPATH=.:scripts .venv/bin/python \
        benchmarks/results/cpu-2026-12-07-session37/naive_without_season_probe.py \
        --benchmark data/benchmark --judge benchmarks/results/cpu-2026-12-07-session37/judge-runs \
        --out benchmarks/results/cpu-2026-12-07-session37/naive-without-season
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from eval_checkpoints import main as score_checkpoints

import tsfm.naive_blend
from tsfm.pipelines.evaluate import normalise, paired_ratio_interval, read_results

SETTINGS = ["--decoding", "masked", "--infer-nonnegative", "on", "--naive-blend", "inverse_mse"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--judge", type=Path, required=True, help="a judge_checkpoints.py output folder")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    detect = tsfm.naive_blend.detect_period
    tsfm.naive_blend.detect_period = lambda context: detect(context).clamp(min=1)  # no season: the naive forecast
    frames = []
    for spans in (2, 3):
        judged = args.judge / f"spans_back_{spans}"
        out = args.out / f"spans_back_{spans}"
        score_checkpoints(["default", "--names", "naive-without-season", "--benchmark", str(args.benchmark),
                           "--out", str(out), "--spans-back", str(spans), "--device", "cpu", "--normaliser",
                           str(judged / "seasonal_naive" / "all_results.csv"), *SETTINGS])
        results = pd.concat([read_results(out / "naive-without-season"), read_results(judged / "reference")])
        frames.append(normalise(results, read_results(judged / "seasonal_naive")).assign(spans_back=spans))
    scores = pd.concat(frames).set_index(["model", "dataset", "spans_back"])
    probe, reference = scores.loc["naive-without-season"], scores.loc["reference"]
    units = probe.index.intersection(reference.index)
    print(f"{len(units)} configuration-spans, paired ratio to the unchanged default [95%]:")
    for metric in ("MASE", "CRPS"):
        ratio, low, high = paired_ratio_interval(probe.loc[units, metric].to_numpy(),
                                                 reference.loc[units, metric].to_numpy())
        print(f"  {metric} {ratio:.4f} [{low:.4f}, {high:.4f}]")
    per_config = np.exp(np.log(probe.loc[units, "MASE"] / reference.loc[units, "MASE"])
                        .groupby(level="dataset").mean())
    moved = per_config[(per_config - 1).abs() > 0.0005].sort_values()
    print("MASE ratio where it moved (geometric mean over the two spans):")
    print(moved.round(4).to_string())


if __name__ == "__main__":
    main()
