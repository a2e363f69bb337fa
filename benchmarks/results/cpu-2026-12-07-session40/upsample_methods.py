"""`--upsample-texture` 0 (straight lines) against 0.25, 0.5 and 1: how the fine steps of the upsampled copies move,
against the benchmark's 5-minute series (its steps before the long term's three test windows), as numbers and a
picture.

Texture of a series' fine steps: the lag-1 correlation of consecutive steps (near 1: the series moves in straight
segments; near 0: each step moves on its own, as a sensor's do), roughness (mean |second difference| / mean |first
difference|), the share of steps with no change, and how large one step is against twelve (mean |x[t+1] - x[t]| /
mean |x[t+12] - x[t]|: 1/12 for a straight line, 1/sqrt(12) = 0.29 for a random walk).

    cd /work/main && .venv/bin/python benchmarks/results/cpu-2026-12-07-session40/upsample_methods.py \\
        --real-data data/device/pretrain --benchmark data/benchmark --out benchmarks/results/cpu-2026-12-07-session40
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
from tsfm.pipelines.data.upsample import add_upsampled, upsample

FACTORS = {"H": 12, "30T": 6, "10T": 2}
TEST_STEPS = 3 * 720  # the long term's three test windows of yosemite_temps/5T, never read here
DAY = 288
TEXTURES = (0.0, 0.25, 0.5, 1.0)


def texture(values: np.ndarray) -> tuple[float, float, float, float]:
    """(lag-1 correlation of steps, roughness, share of flat steps, one step against twelve) of the observed
    values."""
    observed = values[np.isfinite(values)].astype(np.float64)
    steps = np.diff(observed)
    return (float(np.corrcoef(steps[:-1], steps[1:])[0, 1]),
            float(np.abs(np.diff(steps)).mean() / np.abs(steps).mean()), float((steps == 0).mean()),
            float(np.abs(steps).mean() / np.abs(observed[12:] - observed[:-12]).mean()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real-data", type=Path, required=True)
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    yosemite = np.asarray(read_dataset(args.benchmark / "yosemite_temps" / "5T")[0]["target"],
                          dtype=np.float32)[:-TEST_STEPS]
    header = "| series | copies | step correlation | roughness | flat steps | one step / twelve |"
    lines = [header, "|---|--:|--:|--:|--:|--:|",
             "| `yosemite_temps/5T` before its test windows | 1 | "
             + " | ".join(f"{m:.3f}" for m in texture(yosemite)) + " |"]
    for shape in TEXTURES:
        corpus, _ = load_corpus(args.real_data)
        first = len(corpus)
        add_upsampled(corpus, FACTORS, texture=shape, seed=0)
        medians = np.nanmedian([texture(s) for s in corpus.series[first:]], axis=0)
        lines.append(f"| upsampled copies, texture {shape:g} (medians) | {len(corpus) - first} | "
                     + " | ".join(f"{m:.3f}" for m in medians) + " |")
    table = "\n".join(lines)
    (args.out / "upsample_methods.txt").write_text(table + "\n")
    print(table)

    corpus, _ = load_corpus(args.real_data)
    hourly = corpus.series[corpus.datasets.index("gefcom2012_temp/H")][-49:]
    fig, axes = plt.subplots(2, 1, figsize=(11, 6.4))
    axes[0].plot(np.arange(2 * DAY + 1), yosemite[-2 * DAY - 1:], lw=0.8, color="k")
    axes[0].set_title("benchmark: yosemite_temps (5T), two days before the long term's test windows")
    fine = np.arange(48 * 12 + 1)
    axes[1].plot(fine, upsample(hourly, 12), lw=0.8, label="texture 0 (straight lines)")
    axes[1].plot(fine, upsample(hourly, 12, 0.5, np.random.default_rng(0)), lw=0.8, label="texture 0.5")
    axes[1].plot(fine[::12], hourly, "k.", ms=3, label="observed hours")
    axes[1].set_title("training: gefcom2012_temp (H), its last two days on a 5-minute grid (x12)")
    axes[1].legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "upsample_methods.png", dpi=110)
    print(f"wrote {args.out / 'upsample_methods.png'}")


if __name__ == "__main__":
    main()
