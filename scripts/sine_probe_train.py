"""CPU probe: can a backbone learn to continue periodic series with masked future tokens? (issue 11 diagnosis)

Trains a 1M model (8 horizon patches, STEPS steps of 64 windows) on one synthetic prior only, then prints the MAE
per horizon patch on fixed test series for masked and autoregressive decoding. One seed, minutes on one CPU
thread: a quick comparison of mixers, not a result on its own.

Two priors:

- ``sines`` (the default; context 512): noisy sines of random period 8-308, tested on sines of period 24, 96, 200.
- ``harmonics``: random periodic *shapes* (1-6 harmonics with random amplitudes and phases) of period 8-308, tested
  at periods 96, 200 and 288 on a fixed shape with flat troughs and a peak, like a day of 5-minute temperatures
  (``yosemite_temps/5T``, the benchmark's weakest series). A sine can be continued from its last few values; such a
  shape, 288 steps = 9 patches long, has to be copied from one period back. Use ``--context-length 1024`` so the
  context holds more than three periods.

    OMP_NUM_THREADS=1 python scripts/sine_probe_train.py 800 'xlstm[3:1]' 1 [SEED] \
        [--prior harmonics] [--context-length 1024]   # steps, backbone, horizon embedding (0/1), seed (0)
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch

from tsfm.forecast import resolve_model
from tsfm.pipelines.data.priors.common import normal, randint, time_grid, uniform
from tsfm.pipelines.train import TrainConfig, train
from tsfm.presets import preset_config

HORIZON_PATCHES = 8
MAX_HARMONICS = 6


def sines(n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """The sine prior: level 10, amplitude 0.5-5.5, period 8-308, random phase, 5% noise."""
    t = time_grid(length, g.device)
    period, phase, amp = uniform(n, g, 8.0, 308.0), uniform(n, g, 0.0, 2 * math.pi), uniform(n, g, 0.5, 5.5)
    return 10 + amp * torch.sin(2 * math.pi * t / period + phase) + 0.05 * amp * normal(g, n, length)


def harmonics(n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """The shape prior: level 10, amplitude 0.5-5.5, period 8-308, 1-6 harmonics (amplitude ~ U(0, 1) / k, random
    phases; the first always present), scaled to a peak of 1 before the amplitude, 5% noise. (Not
    :func:`~tsfm.pipelines.data.priors.common.random_season`, whose normal coefficients and fixed harmonic count
    make other shapes: the probe's recorded numbers come from this one.)"""
    t = time_grid(length, g.device)[:, :, None]
    k = torch.arange(1, MAX_HARMONICS + 1, device=g.device, dtype=torch.float32)
    count = randint(n, g, 1, MAX_HARMONICS + 1)
    weights = uniform(n, g, 0.0, 1.0, MAX_HARMONICS) / k * (k <= count)
    weights[:, 0] = weights[:, 0].clamp(min=0.2)
    phase = uniform(n, g, 0.0, 2 * math.pi, MAX_HARMONICS)
    angle = 2 * math.pi * t * k / uniform(n, g, 8.0, 308.0)[:, :, None] + phase[:, None, :]
    shape = (weights[:, None, :] * torch.sin(angle)).sum(-1)
    shape = shape / shape.abs().amax(1, keepdim=True)
    amp = uniform(n, g, 0.5, 5.5)
    return 10 + amp * shape + 0.05 * amp * normal(g, n, length)


def test_series(prior: str, period: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """A fixed test series of ``period``: a sine, or (harmonics) flat troughs with a peak once a period."""
    t = np.arange(length)
    if prior == "sines":
        wave = np.sin(2 * np.pi * t / period)
    else:
        wave = np.clip(np.sin(2 * np.pi * t / period), -0.3, 1.0) + 0.25 * np.sin(4 * np.pi * t / period + 1.0)
        wave = wave / np.abs(wave).max()
    return (10 + 3 * wave + 0.1 * rng.standard_normal(length)).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("steps", type=int)
    parser.add_argument("backbone")
    parser.add_argument("horizon_embedding", choices=("0", "1"))
    parser.add_argument("seed", type=int, nargs="?", default=0)
    parser.add_argument("--prior", choices=("sines", "harmonics"), default="sines")
    parser.add_argument("--context-length", type=int, default=512)
    args = parser.parse_args()
    torch.set_num_threads(1)
    horizon_embedding = args.horizon_embedding == "1"
    context = args.context_length
    model_config = preset_config(args.backbone, "1M", context_length=context, train_horizon_patches=HORIZON_PATCHES,
                                 horizon_embedding=horizon_embedding)
    train_config = TrainConfig(steps=args.steps, batch_size=64, context_length=context, synthetic_share=1.0,
                               pool_size=1024, warmup_steps=30, val_every=10**6, checkpoint_every=10**6,
                               learning_rate=1e-3, seed=args.seed)
    suffix = (f"_s{args.seed}" if args.seed else "") + ("" if args.prior == "sines" else f"_{args.prior}_{context}")
    run = f"runs/sine_probe/{args.backbone}_{args.steps}_{int(horizon_embedding)}{suffix}"
    prior = sines if args.prior == "sines" else harmonics
    out = train(model_config, train_config, run, prior=prior, progress=False, accelerator="cpu")
    model = resolve_model(str(out))
    rng = np.random.default_rng(0)
    median = model.quantile_levels.index(0.5)
    horizon = HORIZON_PATCHES * model_config.patch_size
    for period in (24, 96, 200) if args.prior == "sines" else (96, 200, 288):
        x = test_series(args.prior, period, context + horizon, rng)
        for decoding in ("masked", "autoregressive"):
            forecast = model.forecast(torch.from_numpy(x[None, :context]), horizon, decoding=decoding)[0, median]
            error = np.abs(forecast.numpy() - x[context:]).reshape(HORIZON_PATCHES, -1).mean(1)
            print(period, decoding, "MAE per patch", np.round(error, 2), "mean", round(float(error.mean()), 2))


if __name__ == "__main__":
    main()
