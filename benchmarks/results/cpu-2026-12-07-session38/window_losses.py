"""How unequal are the training windows' losses? The shipped default's pinball loss per window on four batches of 64
windows drawn by the training sampler at the default's recipe (context 2,048, half synthetic with ``repeat=0.1``,
the capped real corpus), no masking; the numbers behind ``tsfm.heads.balanced_pinball_loss``'s docstring:

    cd /work/main && PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2026-12-07-session38/window_losses.py
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from tsfm import load_model
from tsfm.heads import pinball_per_step
from tsfm.pipelines.data.batches import BatchSampler
from tsfm.pipelines.data.corpus import load_corpus
from tsfm.pipelines.data.priors import DEFAULT_PRIOR_MIX, sample_priors
from tsfm.pipelines.train import TrainConfig, batch_config


def main() -> None:
    torch.manual_seed(0)
    model = load_model("default").float().eval()
    train, _ = load_corpus("data/device/pretrain", max_length=100_000)
    run = TrainConfig(batch_size=64, context_length=2048, synthetic_share=0.5, pool_size=256,
                      prior_mix={**DEFAULT_PRIOR_MIX, "repeat": 0.1})
    sampler = BatchSampler(batch_config(model.config, run), train,
                           prior=functools.partial(sample_priors, mix=run.prior_mix), seed=3)
    losses = []
    with torch.no_grad():
        for step in range(4):
            batch = sampler.draw(step)
            out = model(batch.context, num_future_tokens=model.config.train_horizon_patches - 1)
            truth = model.next_patch_truth(batch.context, batch.target, out.scale)
            loss, weight = pinball_per_step(out.quantiles, truth, model.quantile_levels)
            losses.append(loss.sum((1, 2)) / weight.sum((1, 2)).clamp(min=1))
    per_window = torch.cat(losses).numpy()
    levels = [0, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1]
    print(f"{per_window.size} windows; mean {per_window.mean():.4f}")
    values = np.quantile(per_window, levels)
    print("quantiles " + ", ".join(f"{q:g}: {v:.4f}" for q, v in zip(levels, values, strict=True)))
    top = np.sort(per_window)[::-1]
    print(f"share of the summed loss in the top 5% of windows: {top[: len(top) // 20].sum() / top.sum():.3f}")


if __name__ == "__main__":
    main()
