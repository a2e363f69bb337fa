"""Does the step-to-step texture of a 5-minute context move the default's forecast? On `yosemite_temps/5T/long`,
spans 2-8 (21 windows of 720 steps; never the test windows), the default's median forecast MAE from the context as
it is and from the context smoothed by a centred moving mean of K steps (which removes most of the sensor's
step-to-step movement and keeps its daily shape), against the same unsmoothed truth; Seasonal Naive from the raw
context beside them. Descriptive, nothing is chosen from it: if smoothing the input helps, the model reads rough
5-minute texture worse than smooth input, which textured training copies (`--upsample-texture`) could address.

    cd /work/main && PYTHONPATH=.:benchmarks/results/cpu-2026-12-07-session38 .venv/bin/python \\
        benchmarks/results/cpu-2026-12-07-session40/texture_probe.py --benchmark data/benchmark [--models A,B]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from five_minute_lead_times import DAY, windows

from tsfm import load_model


def smooth(context: np.ndarray, width: int) -> np.ndarray:
    """Centred moving mean of ``width`` steps over the observed values (missing ones skipped, staying missing)."""
    kernel = np.ones(width)
    observed = np.isfinite(context)
    filled = np.where(observed, context, 0.0)
    sums = np.stack([np.convolve(row, kernel, mode="same") for row in filled])
    counts = np.stack([np.convolve(o.astype(float), kernel, mode="same") for o in observed])
    return np.where(observed, sums / np.maximum(counts, 1), np.nan).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--widths", default="3,5,9")
    parser.add_argument("--models", default="default", help="comma-separated built-in names or checkpoint folders")
    args = parser.parse_args()
    context, truth = windows(args.benchmark, range(2, 9))
    horizon = truth.shape[1]
    naive = np.tile(context[:, -DAY:], (1, -(-horizon // DAY)))[:, :horizon]
    print(f"{truth.shape[0]} windows of {horizon} steps (spans 2-8); MAE of the median against the raw truth")
    print("| model | input | with the blend | x SN | without | x SN |")
    print("|---|---|--:|--:|--:|--:|")
    reference = np.nanmean(np.abs(naive - truth))
    inputs = {"raw": context, **{f"moving mean of {w}": smooth(context, w) for w in map(int, args.widths.split(","))}}
    for spec in args.models.split(","):
        model = load_model(spec).eval()
        median = model.quantile_levels.index(0.5)
        for name, given in inputs.items():
            tensor = torch.from_numpy(given)
            blended = model.forecast(tensor, horizon)[:, median].numpy()
            alone = model.forecast(tensor, horizon, naive_blend="off")[:, median].numpy()
            a, b = np.nanmean(np.abs(blended - truth)), np.nanmean(np.abs(alone - truth))
            print(f"| {spec} | {name} | {a:.3f} | {a / reference:.3f} | {b:.3f} | {b / reference:.3f} |")
    print(f"| Seasonal Naive | raw | {reference:.3f} | 1 | | |")
    for name, given in list(inputs.items())[1:]:  # the blend's other member also reads the smoothed context
        copy = np.tile(given[:, -DAY:], (1, -(-horizon // DAY)))[:, :horizon]
        error = np.nanmean(np.abs(copy - truth))
        print(f"| Seasonal Naive | {name} | {error:.3f} | {error / reference:.3f} | | |")


if __name__ == "__main__":
    main()
