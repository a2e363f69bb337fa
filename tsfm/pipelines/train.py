"""Pretraining: a Lightning module around ``Forecaster.training_loss`` and a data module over synthetic and real series.

Why Lightning: checkpointing, progress bars, precision, gradient clipping and multi-GPU come for free and are
well tested; this file only says what is specific to us (the loss, the sampler, the schedule). The result of a
run is a tsfm checkpoint folder (``config.json`` + ``model.safetensors``) written by ``tsfm.checkpoint``, with the
training provenance (command, data, steps, final loss) inside ``config.json``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from tsfm.checkpoint import save_model
from tsfm.config import ModelConfig
from tsfm.model import Forecaster
from tsfm.pipelines.data.sampler import SyntheticStream, WindowSampler


@dataclass(frozen=True)
class TrainConfig:
    """How to train (the model itself is described by ``ModelConfig``).

    Attributes:
        steps: optimizer steps.
        batch_size: windows per step.
        learning_rate: peak AdamW learning rate (linear warm-up, cosine decay to 10%).
        warmup_steps: linear warm-up length.
        weight_decay: AdamW weight decay (not applied to biases and norm gains).
        context_length: training context in steps (multiple of the patch size); the model is trained on random
            shorter contexts too (the sampler draws lengths down to one patch).
        mask_ratio: fraction of context patches hidden in contiguous runs.
        max_mask_run: longest hidden run in patches.
        synthetic_fraction: share of windows drawn from fresh synthetic series (the rest from ``real_series``).
        synthetic_pool: synthetic series kept in the generator's pool.
        grad_clip: gradient-norm clip.
        seed: everything random derives from it.
        num_workers: DataLoader workers.
        precision: Lightning precision string ("32-true", "bf16-mixed", ...).
    """

    steps: int = 1000
    batch_size: int = 64
    learning_rate: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.05
    context_length: int = 512
    mask_ratio: float = 0.15
    max_mask_run: int = 4
    synthetic_fraction: float = 1.0
    synthetic_pool: int = 2048
    grad_clip: float = 1.0
    seed: int = 0
    num_workers: int = 0
    precision: str = "32-true"

    def __post_init__(self) -> None:
        if self.steps <= 0 or self.batch_size <= 0:
            raise ValueError("steps and batch_size must be positive")
        if not 0.0 <= self.synthetic_fraction <= 1.0:
            raise ValueError(f"synthetic_fraction must be in [0, 1], got {self.synthetic_fraction}")


class ForecasterModule(L.LightningModule):
    """Lightning wrapper: one training step = pinball loss on a batch of windows."""

    def __init__(self, model_config: ModelConfig, train_config: TrainConfig) -> None:
        super().__init__()
        self.model = Forecaster(model_config)
        self.train_config = train_config

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.model.training_loss(
            batch["context"],
            batch["target"],
            mask_ratio=self.train_config.mask_ratio,
            max_mask_run=self.train_config.max_mask_run,
        )
        self.log("train_loss", loss, prog_bar=True, on_step=True, batch_size=batch["context"].shape[0])
        return loss

    def configure_optimizers(self) -> dict[str, Any]:
        decay, no_decay = [], []
        for name, param in self.model.named_parameters():
            (no_decay if param.dim() < 2 or name.endswith(".bias") else decay).append(param)
        cfg = self.train_config
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.learning_rate,
            betas=(0.9, 0.95),
        )

        def schedule(step: int) -> float:
            if step < cfg.warmup_steps:
                return (step + 1) / cfg.warmup_steps
            progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps))
            return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class MixedStream(torch.utils.data.IterableDataset):
    """Interleave synthetic and real windows with a fixed share, deterministically per seed."""

    def __init__(self, synthetic: torch.utils.data.IterableDataset | None,
                 real: torch.utils.data.IterableDataset | None, synthetic_fraction: float, seed: int) -> None:
        super().__init__()
        self.synthetic, self.real = synthetic, real
        self.synthetic_fraction, self.seed = synthetic_fraction, seed

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        rng = np.random.default_rng([self.seed, info.id if info else 0, 7])
        synthetic = iter(self.synthetic) if self.synthetic is not None else None
        real = iter(self.real) if self.real is not None else None
        while True:
            use_synthetic = real is None or (synthetic is not None and rng.random() < self.synthetic_fraction)
            yield next(synthetic if use_synthetic else real)


def load_real_series(root: str | os.PathLike[str], *, min_length: int = 64) -> tuple[list[np.ndarray], np.ndarray]:
    """Every univariate series (multivariate targets split per variate) of a GIFT-Eval-format root, with weights.

    Weights give each dataset the same total share, so a corpus with one huge and many small sets is not
    dominated by the huge one. Series with fewer than ``min_length`` observed steps are dropped.
    Returns ``(series, weights)``.
    """
    from tsfm.pipelines.data.gift_format import read_root

    series: list[np.ndarray] = []
    weights: list[float] = []
    for _, entries in sorted(read_root(root).items()):
        kept = []
        for entry in entries:
            target = np.asarray(entry["target"], dtype=np.float32)
            for variate in target.reshape(-1, target.shape[-1]):
                if np.isfinite(variate).sum() >= min_length:
                    kept.append(variate)
        series += kept
        weights += [1.0 / len(kept)] * len(kept) if kept else []
    if not series:
        raise ValueError(f"no series with at least {min_length} observed steps under {root}")
    return series, np.asarray(weights)


def make_dataloader(model_config: ModelConfig, train_config: TrainConfig,
                    real_series: Sequence[np.ndarray] = (), real_weights: np.ndarray | None = None) -> DataLoader:
    """Windows of ``context_length`` + ``train_horizon_patches * patch_size`` steps from synthetic and real data."""
    prediction_length = model_config.train_horizon_patches * model_config.patch_size
    common = dict(context_length=train_config.context_length, prediction_length=prediction_length,
                  patch_size=model_config.patch_size)
    synthetic = None
    if train_config.synthetic_fraction > 0 or not len(real_series):
        synthetic = SyntheticStream(**common, pool_size=train_config.synthetic_pool, seed=train_config.seed)
    real = None
    if len(real_series):
        real = WindowSampler(list(real_series), **common, seed=train_config.seed + 1, weights=real_weights)
    fraction = train_config.synthetic_fraction if real is not None else 1.0
    stream = MixedStream(synthetic, real, fraction, train_config.seed)
    return DataLoader(stream, batch_size=train_config.batch_size, num_workers=train_config.num_workers)


def train(
    model_config: ModelConfig,
    train_config: TrainConfig,
    out_dir: str | os.PathLike[str],
    *,
    real_series: Sequence[np.ndarray] = (),
    real_weights: np.ndarray | None = None,
    data_description: str = "synthetic",
    accelerator: str = "auto",
    progress: bool = True,
) -> Path:
    """Train a Forecaster from scratch and write its checkpoint to ``out_dir``; returns the folder."""
    L.seed_everything(train_config.seed, workers=True, verbose=False)
    module = ForecasterModule(model_config, train_config)
    loader = make_dataloader(model_config, train_config, real_series, real_weights)
    trainer = L.Trainer(
        max_steps=train_config.steps,
        accelerator=accelerator,
        devices=1,
        precision=train_config.precision,
        gradient_clip_val=train_config.grad_clip,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=progress,
        enable_model_summary=False,
        log_every_n_steps=10,
    )
    started = time.time()
    trainer.fit(module, train_dataloaders=loader)
    final_loss = trainer.callback_metrics.get("train_loss")
    provenance = {
        "command": " ".join(["tsfm", *sys.argv[1:]]) if sys.argv and sys.argv[0].endswith("tsfm") else None,
        "train_config": dataclasses.asdict(train_config),
        "data": data_description,
        "final_train_loss": None if final_loss is None else float(final_loss),
        "wall_seconds": round(time.time() - started, 1),
        "num_parameters": module.model.num_parameters(),
        "torch": torch.__version__,
    }
    return save_model(module.model.cpu(), out_dir, training=provenance)
