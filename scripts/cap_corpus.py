"""Copy a GIFT-Eval root keeping only the last N steps of every series (to carry a corpus to a machine with a
transfer-size limit; the GPU machine gets 64 MiB in all, and one minute-level dataset alone is 56 MB).

    python scripts/cap_corpus.py data/pretrain data/device/pretrain --max-length 100000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from tsfm.pipelines.data.frequency import to_pandas_freq
from tsfm.pipelines.data.gift_format import list_datasets, read_dataset, write_dataset


def cap_entry(entry: dict, max_length: int) -> dict:
    """The entry with its target cut to the last ``max_length`` steps and its start moved accordingly."""
    target = entry["target"]
    drop = target.shape[-1] - max_length
    if drop <= 0:
        return entry
    start = pd.Timestamp(entry["start"]) + drop * pd.tseries.frequencies.to_offset(to_pandas_freq(entry["freq"]))
    return {**entry, "start": start, "target": target[..., drop:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--max-length", type=int, required=True)
    args = parser.parse_args(argv)
    for name in list_datasets(args.source):
        entries = [cap_entry({k: e[k] for k in ("item_id", "start", "freq", "target")}, args.max_length)
                   for e in read_dataset(args.source / name)]
        write_dataset(args.dest / name, entries, overwrite=True, description=f"{name}, last {args.max_length} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
