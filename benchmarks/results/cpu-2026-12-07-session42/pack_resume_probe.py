"""Probe: how far a run resumed from a pack (``tsfm pack-run``: bfloat16 weights and step sizes, momentum dropped)
ends from the same run uninterrupted, against how far two seeds end from each other.

Four CPU runs of one small recipe (Transformer 1M, context 512, batch 64, 2,000 steps, cosine from 1e-3, the capped
real corpus and the synthetic priors half and half): ``whole`` uninterrupted; ``exact``, stopped at step 1,000 and
resumed from its ``last.ckpt`` (must equal ``whole``); ``packed``, stopped at 1,000, packed, unpacked into a new
folder and resumed; ``seed``, ``whole`` with another seed. Prints each run's validation losses and the largest
difference of ``packed`` and of ``seed`` from ``whole`` after the resume point.

    PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2026-12-07-session42/pack_resume_probe.py /tmp/pack_probe
"""

from __future__ import annotations

import sys
from pathlib import Path

import lightning as L
import pandas as pd

from tsfm.pipelines.data.corpus import load_corpus
from tsfm.pipelines.run_state import pack_run, unpack_run
from tsfm.pipelines.train import TrainConfig, read_metrics, train
from tsfm.presets import preset_config

STEPS, STOP = 2000, 1000


class StopAt(L.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: L.Trainer, *args: object) -> None:
        if trainer.global_step >= self.step:
            trainer.should_stop = True


def main(root: Path) -> None:
    real, validation = load_corpus("data/device/pretrain", max_length=4096)
    model = preset_config("transformer", "1M", context_length=512, horizon_embedding=True)
    config = TrainConfig(steps=STEPS, batch_size=64, learning_rate=1e-3, warmup_steps=40, context_length=512,
                         synthetic_share=0.5, pool_size=512, val_every=100, val_batches=8, checkpoint_every=100,
                         log_every=10, seed=1, precision="32-true")
    common = dict(real=real, validation=validation, progress=False, accelerator="cpu")
    train(model, config, root / "whole", **common)
    train(model, config, root / "exact", callbacks=[StopAt(STOP)], **common)
    train(model, config, root / "exact", **common)
    train(model, config, root / "stopped", callbacks=[StopAt(STOP)], **common)
    unpack_run(pack_run(root / "stopped", root / "pack"), root / "packed")
    train(model, config, root / "packed", **common)
    train(model, TrainConfig(**{**config.__dict__, "seed": 2}), root / "seed", **common)
    # the n-th validation of each run side by side: a run stopped right after a validation and resumed logs its
    # later validations one step later than an uninterrupted run (Lightning's logging step after that restore; the
    # same weights and numbers, see `exact`)
    val = pd.DataFrame({name: read_metrics(root / name).dropna(subset=["val_loss"])["val_loss"].to_numpy()
                        for name in ("whole", "exact", "packed", "seed")}, index=range(100, STEPS + 1, 100))
    print(val.round(5).to_string())
    after = val[val.index > STOP]
    for name in ("exact", "packed", "seed"):
        gap = (after[name] - after["whole"]).abs()
        print(f"{name}: largest |val - whole's| after step {STOP}: {gap.max():.5f} (mean {gap.mean():.5f}); "
              f"final {after[name].iloc[-1]:.5f} vs {after['whole'].iloc[-1]:.5f}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
