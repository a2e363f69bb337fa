"""How closely models copy a repeating cycle: their own forecasts (blend off) of 24 noisy cycles per period, MAE
against the noiseless cycle (a perfect copy of the cycle scores 0).

    PYTHONPATH=. python benchmarks/results/gpu-2026-12-06-session34/copy_probe.py default runs/a/model [...]
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from tsfm import predict
from tsfm.checkpoint import load_model
from tsfm.pipelines.data.priors.common import random_season, time_grid

CONTEXT, SERIES, NOISE = 2048, 24, 0.3
PERIODS_AND_HORIZONS = ((24, 48), (48, 96), (96, 192), (288, 720), (32, 96), (64, 128), (160, 320))


def main(models: list[str]) -> None:
    loaded = {name: load_model(name, naive_blend="off") for name in models}
    print("| period, horizon | " + " | ".join(models) + " |")
    for period, horizon in PERIODS_AND_HORIZONS:
        g = torch.Generator().manual_seed(period)
        t = time_grid(CONTEXT + horizon, "cpu")
        cycle = random_season(t, torch.full((SERIES, 1), float(period)), g, decay=(0.3, 2.0)) * 10 + 30
        noisy = (cycle + NOISE * torch.randn(SERIES, CONTEXT + horizon, generator=g)).numpy()
        errors = []
        for model in loaded.values():
            _, median = predict(noisy[:, :CONTEXT], horizon, model=model)
            errors.append(np.abs(median - cycle.numpy()[:, CONTEXT:]).mean())
        print(f"| {period}, {horizon} | " + " | ".join(f"{e:.3f}" for e in errors) + " |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
