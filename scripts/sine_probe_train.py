"""CPU probe: can a backbone learn to continue sines with masked future tokens? (issue 11 diagnosis)

Trains a 1M model (context 512, 8 horizon patches, 800 steps of 64 windows) on noisy sines of random period 8-308
only, then prints the MAE per horizon patch on sines of period 24, 96 and 200 for masked and autoregressive
decoding. One seed, about 10 minutes on one CPU thread: a quick comparison of mixers, not a result on its own.

    OMP_NUM_THREADS=1 python scripts/sine_probe_train.py 800 'xlstm[3:1]' 0 [SEED]  # steps, backbone, horizon
                                                                                       # embedding, seed (0)
"""

from __future__ import annotations

import math
import sys

import numpy as np
import torch

from tsfm.forecast import resolve_model
from tsfm.pipelines.train import TrainConfig, train
from tsfm.presets import preset_config


def sines(n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """The prior: level 10, amplitude 0.5-5.5, period 8-308, random phase, 5% noise."""
    dev = g.device
    t = torch.arange(length, device=dev, dtype=torch.float32)
    period = 8 + torch.rand(n, 1, generator=g, device=dev) * 300
    phase = torch.rand(n, 1, generator=g, device=dev) * 2 * math.pi
    amp = 0.5 + torch.rand(n, 1, generator=g, device=dev) * 5
    x = 10 + amp * torch.sin(2 * math.pi * t / period + phase)
    return x + 0.05 * amp * torch.randn(n, length, generator=g, device=dev)


def main() -> None:
    torch.set_num_threads(1)
    steps, spec, horizon_embedding = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    model_config = preset_config(spec, "1M", context_length=512, train_horizon_patches=8,
                                 horizon_embedding=horizon_embedding)
    train_config = TrainConfig(steps=steps, batch_size=64, context_length=512, synthetic_share=1.0, pool_size=1024,
                               warmup_steps=30, val_every=10**6, checkpoint_every=10**6, learning_rate=1e-3, seed=seed)
    run = f"runs/sine_probe/{spec}_{steps}_{int(horizon_embedding)}" + (f"_s{seed}" if seed else "")
    out = train(model_config, train_config, run, prior=sines,
                progress=False, accelerator="cpu")
    model = resolve_model(str(out))
    rng = np.random.default_rng(0)
    median = model.quantile_levels.index(0.5)
    for period in (24, 96, 200):
        t = np.arange(512 + 256)
        x = (10 + 3 * np.sin(2 * np.pi * t / period) + 0.1 * rng.standard_normal(len(t))).astype(np.float32)
        for decoding in ("masked", "autoregressive"):
            forecast = model.forecast(torch.from_numpy(x[None, :512]), 256, decoding=decoding)[0, median].numpy()
            error = np.abs(forecast - x[512:]).reshape(8, 32).mean(1)
            print(period, decoding, "MAE per patch", np.round(error, 2))


if __name__ == "__main__":
    main()
