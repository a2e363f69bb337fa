"""How often does the shipped default beat Seasonal Naive on `yosemite_temps/5T`, window span by window span? The
issue's 5-minute must is decided on one span (the test windows, span 1) of one series; this probe scores the default
(its shipped inference) and Seasonal Naive on the same configurations for spans 1 to N back and prints the MASE and
CRPS ratios per span and term, so the test span can be read beside the spans before it. Descriptive only: no model or
setting is chosen from it.

    cd /work/main && PYTHONPATH=.:scripts .venv/bin/python \
        benchmarks/results/cpu-2026-12-07-session38/five_minute_spans.py --benchmark data/benchmark \
        --out /tmp/five-minute-spans --spans 1 2 3 4 5 6 7 8
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from eval_checkpoints import main as score_checkpoints

from tsfm.pipelines.evaluate import CRPS, MASE, key_part, read_results

CONFIGS = ["yosemite_temps/5T/short", "yosemite_temps/5T/medium", "yosemite_temps/5T/long"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--spans", type=int, nargs="+", required=True)
    args = parser.parse_args()
    rows = []
    for spans in args.spans:
        out = args.out / f"spans_back_{spans}"
        common = ["--benchmark", str(args.benchmark), "--out", str(out), "--spans-back", str(spans),
                  "--device", "cpu", "--configs", *CONFIGS]
        score_checkpoints(["seasonal_naive", *common])
        score_checkpoints(["default", "--normaliser", str(out / "seasonal_naive" / "all_results.csv"), *common])
        naive = read_results(out / "seasonal_naive").set_index("dataset")
        model = read_results(out / "default").set_index("dataset")
        for key in model.index.intersection(naive.index):
            rows.append({"span": spans, "term": key_part(pd.Series([key]), "term").iloc[0],
                         "MASE": model.loc[key, MASE] / naive.loc[key, MASE],
                         "CRPS": model.loc[key, CRPS] / naive.loc[key, CRPS]})
    table = pd.DataFrame(rows)
    for metric in ("MASE", "CRPS"):
        wide = table.pivot(index="span", columns="term", values=metric)[["short", "medium", "long"]]
        wide["geometric mean"] = np.exp(np.log(wide).mean(axis=1))
        print(f"\n{metric} ratio of the default to Seasonal Naive, per span back (1: the test windows):")
        print(wide.round(3).to_string())
        below = (wide[["short", "medium", "long"]] < 1).sum()
        print(f"spans below Seasonal Naive of {len(wide)}: " + ", ".join(f"{t} {n}" for t, n in below.items()))


if __name__ == "__main__":
    main()
