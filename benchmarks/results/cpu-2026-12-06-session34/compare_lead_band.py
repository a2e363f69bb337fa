"""Per configuration-span ratios of a judged blend prototype against the shipped model (``tf10-cont2``), both as
judged on the windows before the test windows; writes ``per_config.csv`` into each folder and prints the movers:

    cd /work/main && PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2026-12-06-session34/compare_lead_band.py \
        benchmarks/results/cpu-2026-12-06-session34/lead-band-period [...]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from tsfm.pipelines.evaluate import normalise, read_results

JUDGE = Path("benchmarks/results/cpu-2026-12-06-session27/judge")
REFERENCE = "tf10-cont2"


def per_config(folder: Path) -> pd.DataFrame:
    """One row per configuration and span: ratios x Seasonal Naive of both models and ours / shipped."""
    frames = []
    for spans in (2, 3):
        judged = JUDGE / f"spans_back_{spans}"
        naive = read_results(judged / "seasonal_naive")
        ours = normalise(read_results(folder / f"spans_back_{spans}"), naive).set_index("dataset")
        ref = normalise(read_results(judged / REFERENCE), naive).set_index("dataset").loc[ours.index]
        frames.append(pd.DataFrame({
            "spans_back": spans,
            "MASE_shipped": ref["MASE"], "MASE_ours": ours["MASE"], "MASE_ratio": ours["MASE"] / ref["MASE"],
            "CRPS_shipped": ref["CRPS"], "CRPS_ours": ours["CRPS"], "CRPS_ratio": ours["CRPS"] / ref["CRPS"],
        }))
    return pd.concat(frames).reset_index().sort_values(["dataset", "spans_back"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+")
    args = parser.parse_args()
    pd.set_option("display.width", 200)
    for folder in args.folders:
        table = per_config(folder)
        table.round(4).to_csv(folder / "per_config.csv", index=False)
        print(f"== {folder.name}: {len(table)} configuration-spans, geometric mean ratio MASE "
              f"{np.exp(np.log(table['MASE_ratio']).mean()):.4f} CRPS {np.exp(np.log(table['CRPS_ratio']).mean()):.4f}")
        columns = ["dataset", "spans_back", "MASE_shipped", "MASE_ratio", "CRPS_shipped", "CRPS_ratio"]
        print(table[table["dataset"].str.contains("yosemite|m4_hourly")][columns].round(4).to_string(index=False))
        by_mean = table.assign(both=np.log(table["MASE_ratio"]) + np.log(table["CRPS_ratio"])).sort_values("both")
        print("-- biggest gains\n" + by_mean.head(8)[columns].round(4).to_string(index=False))
        print("-- biggest losses\n" + by_mean.tail(8)[columns].round(4).to_string(index=False))
        moved = table[(table["MASE_ratio"] - 1).abs() > 1e-6]
        print(f"-- configuration-spans moved at all (MASE): {len(moved)} of {len(table)}")


if __name__ == "__main__":
    main()
