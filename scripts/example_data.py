"""Write the Quickstart's input: ETTh1 (hourly transformer load and oil temperature, 7 series) in long format.

Reads the raw CSV from ``../shared/data/raw`` (or ``$TSFM_SHARED_DIR/data/raw``); the raw file is never copied into
the repository. Without the shared folder it says so and exits non-zero rather than inventing data.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]


def shared_raw_dir() -> Path:
    shared = Path(os.environ.get("TSFM_SHARED_DIR", REPO.parent / "shared"))
    return shared / "data" / "raw"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "out" / "etth1.csv")
    parser.add_argument("--last", type=int, default=2048, help="keep the last N hours of each series")
    args = parser.parse_args(argv)
    raw = shared_raw_dir() / "ETTh1.csv"
    if not raw.is_file():
        print(f"error: {raw} not found; set TSFM_SHARED_DIR to the folder holding data/raw", file=sys.stderr)
        return 2
    wide = pd.read_csv(raw, parse_dates=["date"]).tail(args.last)
    long = wide.melt(id_vars="date", var_name="item_id", value_name="target")
    long = long.rename(columns={"date": "timestamp"})[["item_id", "timestamp", "target"]]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    long.to_csv(args.out, index=False)
    print(f"wrote {args.out}: {long['item_id'].nunique()} series x {args.last} hourly steps (ETTh1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
