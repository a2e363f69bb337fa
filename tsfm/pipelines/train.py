"""Pretraining: a Lightning module around ``Forecaster.training_loss`` fed by the device-resident batch sampler.

Why Lightning: checkpointing with exact resume (model, optimizer, scheduler, loop counters), mixed precision,
gradient clipping, a wall-clock budget (``max_time``), CSV logs and multi-device strategies are well tested there;
this file says only what is ours: the loss, where batches come from, the schedule and which checkpoint to keep.

Batches do not come from a DataLoader: :class:`~tsfm.pipelines.data.batches.BatchSampler` draws batch ``s`` on the
model's device from ``(seed, s)`` alone, so resuming at step ``s`` replays exactly the batches of an uninterrupted
run (tested). The Lightning loop is driven by an endless stream of empty ticks.

With ``devices > 1`` the run is data-parallel (Lightning's DDP, one process per device): each process draws the
step's whole batch and trains on its slice, ``batch_size`` stays the global batch, and the loss is weighted so the
averaged gradient is the whole batch's (``PretrainModule._share_of_global_loss``); the trajectory is the one-device
one and a run may resume on another device count. Rank 0 alone writes files; validation runs whole on every process.

A run writes under ``out``: ``checkpoints/last.ckpt`` (resume point, written every ``checkpoint_every`` steps and
when the run stops), ``checkpoints/best.ckpt`` (lowest validation loss), ``logs/version_*/metrics.csv`` (one version
per call), ``loss.png``, and ``model/`` (a tsfm checkpoint folder with the best weights and the provenance). The
validation split is whole held-out series of the real corpus (:mod:`tsfm.pipelines.data.corpus`), never the
benchmark.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch

from tsfm.checkpoint import MAX_SHARD_BYTES, load_model, read_checkpoint_config, resolve_model_path, save_model
from tsfm.config import ModelConfig
from tsfm.model import Forecaster
from tsfm.pipelines.data.batches import SHARE_FIELDS, Batch, BatchConfig, BatchSampler, PriorFn, fixed_batches
from tsfm.pipelines.data.corpus import Corpus
from tsfm.pipelines.data.priors import BLOCK as PRIOR_BLOCK
from tsfm.pipelines.data.priors import DEFAULT_PRIOR_MIX, check_mix, sample_priors

__all__ = ["PretrainModule", "TrainConfig", "TrainingError", "batch_config", "is_main_process", "read_metrics",
           "train"]


class TrainingError(ValueError):
    """A training request that cannot run (bad settings or data), raised before any compute is spent."""


#: The synthetic prior's block for new runs: a whole pool refresh (up to 1,024 series) in one block.
TRAIN_PRIOR_BLOCK = 1024

#: What a run whose saved settings lack a field trained with, where that differs from today's default: such a run
#: resumes on the stream it started (fields added with their old behaviour as the default need no entry).
LEGACY_TRAIN_DEFAULTS = {"prior_block": PRIOR_BLOCK}


@dataclass(frozen=True)
class TrainConfig:
    """How to train (the model itself is described by ``ModelConfig``).

    Attributes:
        steps: optimizer steps of the whole run (the schedule's length; a run may span several calls).
        batch_size: windows per step, over all devices (the global batch; a multiple of ``devices``).
        learning_rate: peak AdamW learning rate (linear warm-up, cosine decay to 10%).
        warmup_steps: linear warm-up length.
        weight_decay: AdamW weight decay (not applied to biases and norm gains).
        context_length: longest training context in steps (a multiple of the patch size).
        synthetic_share: share of windows drawn from the synthetic pool (the rest from the real corpus).
        mixup_prob: share of windows that are TSMixup mixtures.
        full_context_prob: share of windows whose context is the longest the series offers before the cut (as at
            evaluation); the others are cut shorter, uniformly, and left-padded with missing values.
        mask_ratio: share of context patches hidden in contiguous runs; max_mask_run: longest run.
        noise_prob, stride_prob, missing_prob: shares of windows given noise, a stride, missing values.
        pool_size: synthetic series kept on the device (refreshed chunk by chunk while training).
        prior_mix: synthetic families (``tsfm.pipelines.data.priors.PRIORS``) and their shares, normalised;
            ``None`` is ``DEFAULT_PRIOR_MIX``.
        prior_block: series the synthetic prior makes per block (:func:`tsfm.pipelines.data.priors.sample_priors`):
            each block launches the same ~1,600 kernels whatever its size, so the default of 1,024 makes a refresh
            of the pool (``pool_size / 16``, up to 1,024 series) one block: at ``pool_size=16384`` a quarter of the
            launches of blocks of 256, 1.35x the steps/s of a 20M Transformer on an H100 (forty-sixth session), for
            about 28 MiB more memory per refresh. Another block draws other series from the same seed; runs started
            before the forty-fifth session drew blocks of 256 and resume on them (``LEGACY_TRAIN_DEFAULTS``).
        grad_clip: gradient-norm clip.
        seed: everything random derives from it.
        precision: Lightning precision ("32-true", "bf16-mixed", ...).
        val_every: steps between validations (and best-checkpoint updates).
        val_batches: fixed validation batches (drawn once from the held-out series).
        checkpoint_every: steps between resume checkpoints.
        log_every: steps between logged training losses.
        max_minutes: wall-clock budget of this call; the run stops cleanly, saves, and can be resumed.
        compile: ``torch.compile`` the loss (everything but the sequence ops, which stay opaque to the compiler).
        devices: processes (one device each) trained data-parallel with Lightning's DDP; ``batch_size`` stays the
            global batch (each process takes ``batch_size / devices`` windows of it), so the trajectory does not
            depend on this and a run may be resumed on another count.
        grown_lr_scale: peak learning rate of the modules a run grows over its ``init_from`` checkpoint
            (:data:`GROWABLE_FIELDS`), as a multiple of ``learning_rate``: they start at zero while everything else
            is already trained, and a continuation's low rate would leave them barely moved.
        teacher: a tsfm checkpoint (name or folder) to distil from: a small model learns the teacher's whole
            forecast distributions on the same windows besides the data (:meth:`Forecaster.training_loss`), more
            signal per window than the observed values alone. Same patch size and quantile levels; read on every
            training step, so it costs a teacher forward per step. Validation stays the plain pinball loss.
        distill_weight: the teacher's share of the training loss, in [0, 1] (with ``teacher``).
        window_balance: ``None``: the pinball loss pooled over the batch's steps; a float > 0: the mean over windows
            of the logarithm of each window's pinball loss plus this floor (:func:`tsfm.heads.balanced_pinball_loss`:
            every window weighted by its relative error, as the benchmark's ratios weigh configurations). The
            validation loss, which picks the exported checkpoint, is then the same loss (``val_pinball`` logs the
            plain one beside it). Not with ``teacher``.
    """

    steps: int = 1000
    batch_size: int = 64
    learning_rate: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.05
    context_length: int = 512
    synthetic_share: float = 0.5
    mixup_prob: float = 0.2
    full_context_prob: float = 0.5
    mask_ratio: float = 0.15
    max_mask_run: int = 4
    noise_prob: float = 0.1
    stride_prob: float = 0.1
    missing_prob: float = 0.05
    pool_size: int = 4096
    prior_mix: dict[str, float] | None = None
    prior_block: int = TRAIN_PRIOR_BLOCK
    grad_clip: float = 1.0
    seed: int = 0
    precision: str = "32-true"
    val_every: int = 250
    val_batches: int = 4
    checkpoint_every: int = 250
    log_every: int = 10
    max_minutes: float | None = None
    compile: bool = False
    devices: int = 1
    grown_lr_scale: float = 1.0
    teacher: str | None = None
    distill_weight: float = 0.5
    window_balance: float | None = None

    def __post_init__(self) -> None:
        problems = []
        for name in ("steps", "batch_size", "context_length", "val_every", "val_batches", "checkpoint_every",
                     "log_every", "devices", "prior_block"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            problems.append(f"warmup_steps must be a non-negative integer, got {self.warmup_steps!r}")
        if not self.learning_rate > 0:
            problems.append(f"learning_rate must be > 0, got {self.learning_rate!r}")
        for name in SHARE_FIELDS:
            if not 0.0 <= getattr(self, name) <= 1.0:
                problems.append(f"{name} must be in [0, 1], got {getattr(self, name)!r}")
        if self.prior_mix is not None:
            try:
                check_mix(self.prior_mix)
            except ValueError as err:
                problems.append(f"prior_mix: {err}")
        if not 0.0 <= self.distill_weight <= 1.0:
            problems.append(f"distill_weight must be in [0, 1], got {self.distill_weight!r}")
        if self.window_balance is not None and not self.window_balance > 0:
            problems.append(f"window_balance must be > 0 (or None), got {self.window_balance!r}")
        if self.window_balance is not None and self.teacher is not None:
            problems.append("window_balance and teacher do not combine: the distillation term is pooled over steps, "
                            "the balanced loss is a mean over windows")
        if not self.grown_lr_scale > 0:
            problems.append(f"grown_lr_scale must be > 0, got {self.grown_lr_scale!r}")
        if self.max_minutes is not None and not self.max_minutes > 0:
            problems.append(f"max_minutes must be > 0, got {self.max_minutes!r}")
        if not problems and self.batch_size % self.devices:
            problems.append(f"batch_size ({self.batch_size}) must be divisible by devices ({self.devices}): it is "
                            "the global batch, split evenly over the devices")
        if problems:
            raise TrainingError("invalid TrainConfig: " + "; ".join(problems))


def batch_config(model_config: ModelConfig, train_config: TrainConfig, **changes: Any) -> BatchConfig:
    """The sampler settings for a model and a run (the horizon is the model's ``train_horizon_patches``)."""
    cfg = train_config
    try:
        return BatchConfig(
            batch_size=cfg.batch_size,
            context_length=cfg.context_length,
            prediction_length=model_config.train_horizon_patches * model_config.patch_size,
            patch_size=model_config.patch_size,
            synthetic_share=cfg.synthetic_share,
            mixup_prob=cfg.mixup_prob,
            full_context_prob=cfg.full_context_prob,
            mask_ratio=cfg.mask_ratio,
            max_mask_run=cfg.max_mask_run,
            noise_prob=cfg.noise_prob,
            stride_prob=cfg.stride_prob,
            missing_prob=cfg.missing_prob,
            pool_size=cfg.pool_size,
            pool_chunks=16 if cfg.pool_size % 16 == 0 else 1,
            **changes,
        )
    except ValueError as err:
        raise TrainingError(str(err)) from None


#: Seed of the validation windows. Fixed, not derived from the run's seed, so that runs of other seeds (or a run
#: continued with ``init_from`` under a new seed) are judged on the same windows and their losses compare.
VALIDATION_SEED = 1
#: Share of full-length contexts among the validation windows: fixed for the same reason (whatever the run's
#: ``full_context_prob``), at the value every earlier run trained and validated with.
VALIDATION_FULL_CONTEXT_PROB = 0.5


def validation_batches(model_config: ModelConfig, train_config: TrainConfig, validation: Corpus,
                       device: torch.device | str) -> list[Batch]:
    """The run's validation set: ``val_batches`` plain forecasting windows of the held-out series (no mixing,
    augmentation or masking), the same for every seed on one device type."""
    config = dataclasses.replace(batch_config(model_config, train_config), synthetic_share=0.0, mixup_prob=0.0,
                                 noise_prob=0.0, stride_prob=0.0, missing_prob=0.0, mask_ratio=0.0, pool_size=0,
                                 full_context_prob=VALIDATION_FULL_CONTEXT_PROB)
    sampler = BatchSampler(config, validation, seed=VALIDATION_SEED, device=device)
    return fixed_batches(sampler, train_config.val_batches)


def load_teacher(spec: str, model_config: ModelConfig, train_config: TrainConfig) -> Forecaster:
    """The frozen teacher of a distillation run, checked against the student before any compute.

    Raises:
        TrainingError: the checkpoint cannot be read, or its patch size or quantile levels differ from the
            student's, or it cannot read the training context.
    """
    try:
        teacher = load_model(spec)
    except (OSError, ValueError) as err:
        raise TrainingError(f"teacher {spec!r}: {err}") from None
    mine, theirs = model_config, teacher.config
    if (theirs.patch_size, tuple(theirs.quantile_levels)) != (mine.patch_size, tuple(mine.quantile_levels)):
        raise TrainingError(f"teacher {spec!r} forecasts patches of {theirs.patch_size} at levels "
                            f"{list(theirs.quantile_levels)}; the student needs {mine.patch_size} at "
                            f"{list(mine.quantile_levels)}")
    try:
        teacher.check_context_length(train_config.context_length)
    except ValueError as err:
        raise TrainingError(f"teacher {spec!r}: {err}") from None
    return teacher.eval().requires_grad_(False)


class _Ticks(torch.utils.data.IterableDataset):
    """Endless placeholders that drive Lightning's loop; the batch itself is drawn in ``training_step``."""

    def __iter__(self):
        while True:
            yield 0


class PretrainModule(L.LightningModule):
    """One training step = pinball loss on batch ``global_step`` of the sampler (drawn on the model's device)."""

    def __init__(self, model_config: ModelConfig, train_config: TrainConfig, *, real: Corpus | None,
                 validation: Corpus | None, prior: PriorFn | None, grown_prefixes: Sequence[str] = (),
                 teacher: Forecaster | None = None) -> None:
        super().__init__()
        self.grown_prefixes = tuple(grown_prefixes)  # weights of modules grown over init_from: own learning rate
        self.model = Forecaster(model_config)
        self.model_config, self.train_config = model_config, train_config
        self._real, self._validation, self._prior = real, validation, prior
        self.loss = torch.compile(self.model.training_loss) if train_config.compile else self.model.training_loss
        # the training loss's teacher arguments; a dict keeps the teacher out of the module's children: not trained,
        # not saved in checkpoints, not in the optimizer
        self._distillation: dict[str, Any] = {} if teacher is None else {
            "teacher": teacher, "distill_weight": train_config.distill_weight}
        self._balance = {} if train_config.window_balance is None else {"window_balance": train_config.window_balance}
        self.sampler: BatchSampler | None = None
        self.val_data: list[Batch] = []
        self.tokens_per_window = train_config.context_length // model_config.patch_size \
            + model_config.train_horizon_patches

    def on_fit_start(self) -> None:
        if self._distillation:
            self._distillation["teacher"].to(self.device)
        config = batch_config(self.model_config, self.train_config)
        self.sampler = BatchSampler(config, self._real, prior=self._prior, seed=self.train_config.seed,
                                    device=self.device)
        if self._validation is not None and len(self._validation):
            self.val_data = validation_batches(self.model_config, self.train_config, self._validation, self.device)

    def training_step(self, _tick: Any, _index: int) -> torch.Tensor:
        batch = self.sampler.draw(self.global_step)
        if self.trainer.world_size == 1:
            loss = self.loss(batch.context, batch.target, hidden_patches=batch.hidden_patches, **self._distillation,
                             **self._balance)
        else:
            loss = self._share_of_global_loss(batch)
        # not prog_bar=True: Lightning reads every progress-bar value to a Python number after each step (a sync);
        # _ProgressBar shows the loss at its refreshes instead
        self.log("train_loss", loss, on_step=True, batch_size=batch.context.shape[0],
                 sync_dist=self.trainer.world_size > 1)
        return loss

    def _share_of_global_loss(self, batch: Batch) -> torch.Tensor:
        """This process's part of a data-parallel step, scaled so that DDP's mean over processes is exactly the
        loss (and gradient) of the whole batch on one process.

        Every process draws the same global batch (the sampler is a pure function of ``(seed, step)``, and drawing
        costs little next to the model) and keeps its own contiguous slice of ``batch_size / world_size`` rows: the
        processes see different windows, and together exactly the windows one process would see, so the trajectory
        does not depend on the device count. Slicing one drawn batch rather than seeding a sampler per rank is what
        makes resuming on another device count exact.

        The loss is a mean over the scored target steps (over the windows with any, with ``window_balance``), and
        slices hold different numbers of them (padding, missing values), so a plain mean of the slices' losses is
        not the batch's loss. Each slice's loss is weighted by its share of the batch's scored steps (windows)
        counted on the whole batch, which every process has, times ``world_size``, undoing DDP's division by the
        process count.
        """
        world, rank = self.trainer.world_size, self.trainer.global_rank
        rows = slice(rank * batch.context.shape[0] // world, (rank + 1) * batch.context.shape[0] // world)
        counts = self.model.scored_steps(batch.context, batch.target)
        if self._balance:
            counts = counts.gt(0).long()  # a mean over windows
        share = counts[rows].sum() / counts.sum().clamp(min=1)
        loss = self.loss(batch.context[rows], batch.target[rows], hidden_patches=batch.hidden_patches[rows],
                         **self._distillation, **self._balance)
        return loss * (share * world).to(loss.dtype)

    def validation_step(self, index: torch.Tensor, _index: int) -> None:
        batch = self.val_data[int(index)]
        # the whole fixed batch on every process: equal everywhere
        loss = self.loss(batch.context, batch.target, **self._balance)
        self.log("val_loss", loss, on_epoch=True, prog_bar=True, batch_size=batch.context.shape[0],
                 sync_dist=self.trainer.world_size > 1)
        if self._balance:
            self.log("val_pinball", self.loss(batch.context, batch.target), on_epoch=True,
                     batch_size=batch.context.shape[0], sync_dist=self.trainer.world_size > 1)

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, **_: Any) -> None:
        """Clip by global norm here rather than through Lightning, which refuses to clip for fused AdamW (it assumes
        a gradient scaler; bf16 needs none, so the gradients are already unscaled)."""
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.train_config.grad_clip)

    def configure_optimizers(self) -> dict[str, Any]:
        cfg = self.train_config
        groups: dict[tuple[bool, bool], list[torch.nn.Parameter]] = {}
        for name, param in self.model.named_parameters():
            decays = param.dim() >= 2 and not name.endswith(".bias")
            groups.setdefault((decays, name.startswith(self.grown_prefixes)), []).append(param)
        optimizer = torch.optim.AdamW(
            [{"params": params, "weight_decay": cfg.weight_decay if decays else 0.0,
              "lr": cfg.learning_rate * (cfg.grown_lr_scale if grown else 1.0)}
             for (decays, grown), params in sorted(groups.items(), reverse=True)],
            lr=cfg.learning_rate, betas=(0.9, 0.95), fused=self.device.type == "cuda",
        )

        def schedule(step: int) -> float:
            if step < cfg.warmup_steps:
                return (step + 1) / cfg.warmup_steps
            progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps))
            return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["tsfm"] = {"model_config": self.model_config.to_dict(),
                              "train_config": dataclasses.asdict(self.train_config)}


class _ResumePoint(L.Callback):
    """``last.ckpt`` every ``every`` steps and when training stops (step budget, time budget or interrupt), plus the
    run's accumulated training seconds, so a run spread over several calls knows its total cost.

    The seconds are also logged beside the training loss (``train_seconds`` in ``metrics.csv``, at the steps the loss
    is logged, taken as the step ends and before a checkpoint it writes): where a run's time went, compiling the
    first steps, checkpoints, validation, shows as the steps between two logged rows that took longer than the rest.
    """

    def __init__(self, path: Path, every: int) -> None:
        self.path, self.every = path, every
        self.seconds_before = 0.0
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return self.seconds_before + time.monotonic() - self.started

    def state_dict(self) -> dict[str, float]:
        return {"train_seconds": self.elapsed()}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.seconds_before = float(state.get("train_seconds", 0.0))

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.started = time.monotonic()

    def on_train_batch_start(self, trainer: L.Trainer, *args: Any) -> None:
        """Keep the logging step equal to the optimizer step. Lightning (2.6) restores its logging counter one ahead
        for a run that stopped on the step of a validation and a checkpoint, so every later row of ``metrics.csv``
        held the loss of the step before its label; with one optimizer and no gradient accumulation (this trainer)
        the two counters are the same number, so the one Lightning keeps is set from the one it saves right."""
        trainer.fit_loop.epoch_loop._batches_that_stepped = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, *args: Any) -> None:
        # Logged as a tensor made on the device by a fill kernel: Lightning turns a logged Python number into one
        # with ``torch.tensor(value, device=...)``, a blocking host-to-device copy that synchronised the stream at
        # every step, so the host's work for the next step could never overlap the GPU's for this one.
        seconds = torch.full((), self.elapsed(), dtype=torch.float32, device=module.device)
        module.log("train_seconds", seconds, on_step=True, on_epoch=False, rank_zero_only=True)
        if trainer.global_step % self.every == 0:
            self.save(trainer)

    def on_train_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.save(trainer)

    def save(self, trainer: L.Trainer) -> None:
        """The whole training state, optimizer, loops and callbacks included (what exact resume reads); said
        explicitly, which also spares every save Lightning's log line about the unset ``weights_only``."""
        trainer.save_checkpoint(self.path, weights_only=False)


class _ProgressBar(L.pytorch.callbacks.TQDMProgressBar):
    """Lightning's bar, with the training loss read only when the bar refreshes.

    A value logged with ``prog_bar=True`` is turned into a Python number by Lightning after every step (its
    ``_ResultCollection.metrics``), and reading a GPU tensor waits for the GPU: one synchronisation per step, which
    keeps the host from queueing the next step while the GPU runs this one. The loss is logged for the logger only
    and read here from ``trainer.callback_metrics``, which holds it as a tensor, once per refresh."""

    def get_metrics(self, trainer: L.Trainer, module: L.LightningModule) -> dict[str, int | str | float | dict]:
        metrics = super().get_metrics(trainer, module)
        loss = trainer.callback_metrics.get("train_loss")
        if loss is not None:
            metrics["train_loss"] = f"{loss.item():.3f}"
        return metrics


class _CallBudget(L.pytorch.callbacks.Timer):
    """Stops this call after ``max_minutes``. Lightning's own time limit restores the elapsed time a checkpoint has
    saved, so a run that stopped on one call's budget would stop again at once when resumed; here the budget is per
    call, as a run spread over several device calls needs."""

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Keep this call's clock: the time earlier calls trained is in the run's provenance, not in the budget."""


#: Settings a resumed run may change: neither changes the trajectory (the batch is global, see
#: ``PretrainModule._share_of_global_loss``), so a run started on one device may continue on several and back.
RESUMABLE_CHANGES = frozenset({"max_minutes", "devices"})


def _check_resume(checkpoint_path: Path, model_config: ModelConfig, train_config: TrainConfig) -> None:
    """Refuse to resume a run whose model or data settings differ (only the time budget and device count may
    change)."""
    saved = torch.load(checkpoint_path, map_location="cpu", weights_only=False).get("tsfm", {})
    saved_config = saved.get("model_config")
    try:  # fields added to ModelConfig since read as their defaults; inference settings do not touch training
        same = saved_config is not None and ModelConfig.from_dict(saved_config).same_network(model_config)
    except (TypeError, ValueError):
        same = False
    if not same:
        raise TrainingError(f"{checkpoint_path} was trained with another model config; use a new --out")
    ours = dataclasses.asdict(train_config)
    theirs = {**dataclasses.asdict(TrainConfig()), **LEGACY_TRAIN_DEFAULTS, **saved.get("train_config", {})}
    changed = sorted(k for k in ours if k not in RESUMABLE_CHANGES and theirs.get(k) != ours[k])
    if changed:
        raise TrainingError(f"{checkpoint_path} was trained with other settings ({', '.join(changed)}); "
                            "resume with the same settings or use a new --out")


def train(
    model_config: ModelConfig,
    train_config: TrainConfig,
    out_dir: str | os.PathLike[str],
    *,
    real: Corpus | None = None,
    validation: Corpus | None = None,
    prior: PriorFn | None = None,
    data_description: str = "",
    command: str | None = None,
    init_from: str | os.PathLike[str] | None = None,
    accelerator: str = "auto",
    progress: bool = True,
    callbacks: Sequence[L.Callback] = (),
) -> Path:
    """Train (or resume, if ``out_dir/checkpoints/last.ckpt`` exists) and write the tsfm checkpoint ``out_dir/model``.

    Args:
        real: training corpus (``None``: synthetic only); validation: held-out series (``None``: no validation,
            the last weights are exported).
        prior: synthetic generator for the pool (default: :func:`tsfm.pipelines.data.priors.sample_priors`).
        callbacks: more Lightning callbacks (e.g. to stop early).
        command: the command line that started the run, kept in its provenance.
        init_from: a tsfm checkpoint (name or folder) whose weights the run starts from, with a fresh optimizer
            and schedule: continued pretraining across device calls that cannot keep the optimizer state, or
            fine-tuning on a user's own corpus. Its config must equal ``model_config``; a resumed run ignores it
            (its weights come from ``last.ckpt``). Its training provenance is kept as ``parent``.
    Returns:
        The exported checkpoint folder.
    """
    if train_config.context_length % model_config.patch_size:
        raise TrainingError(f"context_length ({train_config.context_length}) must be a multiple of the patch size "
                            f"({model_config.patch_size})")
    if train_config.context_length > model_config.context_length:
        raise TrainingError(f"context_length ({train_config.context_length}) exceeds the model's "
                            f"({model_config.context_length})")
    if prior is None and train_config.synthetic_share > 0:
        prior = functools.partial(sample_priors, mix=train_config.prior_mix or DEFAULT_PRIOR_MIX,
                                  block=train_config.prior_block)
    if (real is None or not len(real)) and (prior is None or train_config.synthetic_share == 0):
        raise TrainingError("nothing to train on: give real series or a synthetic share > 0")
    batch_config(model_config, train_config)  # bad sampler settings fail here, before any compute
    teacher = load_teacher(train_config.teacher, model_config, train_config) if train_config.teacher else None

    out = Path(out_dir)
    checkpoints = out / "checkpoints"
    last = checkpoints / "last.ckpt"
    resume = last.is_file()
    if resume:
        _check_resume(last, model_config, train_config)
    parent, grown = _parent_provenance(init_from, model_config) if init_from is not None else (None, ())
    if train_config.grown_lr_scale != 1.0 and not grown:
        raise TrainingError(f"grown_lr_scale ({train_config.grown_lr_scale}) sets the rate of modules grown over "
                            "init_from (e.g. --seasonal-hint on a checkpoint without it); this run grows none")
    L.seed_everything(train_config.seed, workers=True, verbose=False)
    torch.set_float32_matmul_precision("high")
    module = PretrainModule(model_config, train_config, real=real, validation=validation, prior=prior,
                            grown_prefixes=grown, teacher=teacher)
    if init_from is not None and not resume:
        _load_grown(module.model, load_model(init_from), grown)
    has_validation = validation is not None and len(validation) > 0
    resume_point = _ResumePoint(last, train_config.checkpoint_every)
    callbacks = [resume_point, *callbacks]
    if train_config.max_minutes:
        callbacks.append(_CallBudget(duration={"minutes": train_config.max_minutes}))
    if has_validation:
        callbacks.append(L.pytorch.callbacks.ModelCheckpoint(
            dirpath=checkpoints, filename="best", monitor="val_loss", mode="min", save_top_k=1,
            enable_version_counter=False))
    if progress:
        callbacks.append(_ProgressBar(refresh_rate=50))
    trainer = L.Trainer(
        max_steps=train_config.steps,
        accelerator=accelerator,
        devices=train_config.devices,
        strategy=_strategy(accelerator, train_config.devices),
        use_distributed_sampler=False,  # validation: every process scores all fixed batches (see validation_step)
        precision=train_config.precision,
        logger=L.pytorch.loggers.CSVLogger(out, name="logs"),
        callbacks=callbacks,
        enable_checkpointing=has_validation,
        enable_progress_bar=progress,
        enable_model_summary=False,
        log_every_n_steps=train_config.log_every,
        val_check_interval=train_config.val_every if has_validation else None,
        check_val_every_n_epoch=None,
        limit_val_batches=train_config.val_batches if has_validation else 0,
        num_sanity_val_steps=0,
    )
    ticks = torch.utils.data.DataLoader(_Ticks(), batch_size=None)
    val_loader = torch.utils.data.DataLoader(range(train_config.val_batches), batch_size=None) \
        if has_validation else None
    trainer.fit(module, train_dataloaders=ticks, val_dataloaders=val_loader, ckpt_path=last if resume else None)
    if not trainer.is_global_zero:  # the other processes of a data-parallel run: rank 0 writes everything
        return out / "model"
    return _export(module, trainer, out, train_config, resume_point, data_description, command, real, validation,
                   parent)


#: Environment that keeps NVLink multicast off in a multi-GPU run (see ``_strategy``).
NO_MULTICAST_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _strategy(accelerator: str, devices: int) -> str:
    """Lightning's ``"ddp"`` for several devices (one process per device, started by re-running the command line,
    so ``tsfm train`` needs no launcher), else its default.

    On CUDA, NVLink multicast (NCCL's NVLS, PyTorch's symmetric memory, NVSHMEM) is switched off unless the caller
    set these variables: on the shared multi-GPU H200 hosts this project trains on, a program using multicast can
    put the host's GPUs out of service, and the hosts ask every program to keep it off. They are set before
    Lightning starts the other processes, which inherit them."""
    if devices == 1:
        return "auto"
    if accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available():
        for name, value in NO_MULTICAST_ENV.items():
            os.environ.setdefault(name, value)
    return "ddp"


def is_main_process() -> bool:
    """Whether this process writes a data-parallel run's results: the one of global rank 0, or any process that
    trained on one device. After a ``devices > 1`` call to :func:`train` every process of the run continues the
    caller's code (Lightning started the others by re-running its command line), so code after it that writes
    files or spends compute that is not training (e.g. the sweep's scoring) asks this first."""
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    return not distributed or torch.distributed.get_rank() == 0


#: Model fields a run may switch on over its ``init_from`` checkpoint, each with the weights' prefix of the module it
#: adds: that module starts at zero, so the grown model starts out computing the checkpoint's function.
GROWABLE_FIELDS = {"seasonal_hint": "hint.", "naive_gate": "gate."}

#: Model fields a run may change over its ``init_from`` checkpoint with the same weights: the function the weights
#: compute changes (e.g. where each context is centred), and training adapts them to it.
ADAPTABLE_FIELDS = ("scale_loc_steps",)


def grown_block_prefixes(parent_layers: int, layers: int) -> tuple[str, ...]:
    """Weight prefixes of the residual blocks a run appends to a ``parent_layers``-block checkpoint (depth growth)."""
    return tuple(f"backbone.blocks.{index}." for index in range(parent_layers, layers))


def _parent_provenance(init_from: str | os.PathLike[str], model_config: ModelConfig
                       ) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The starting checkpoint's path and training provenance, and the weight prefixes of the modules this run
    grows over it; refuse one whose model differs from this run's other than by switching on
    :data:`GROWABLE_FIELDS`, by :data:`ADAPTABLE_FIELDS` or by more blocks (``n_layers``: appended, see
    :func:`_load_grown`)."""
    config, training = read_checkpoint_config(resolve_model_path(init_from))
    grown = [k for k in GROWABLE_FIELDS if getattr(model_config, k) and not getattr(config, k)]
    deeper = max(model_config.n_layers, config.n_layers)
    adapted = {k: getattr(model_config, k) for k in ADAPTABLE_FIELDS}
    if not config.replace(**dict.fromkeys(grown, True), **adapted, n_layers=deeper).same_network(model_config):
        changed = sorted(k for k, v in config.to_dict().items() if model_config.to_dict().get(k) != v)
        raise TrainingError(f"init_from {init_from} holds another model ({', '.join(changed)} differ); "
                            "its weights cannot start this run (a run may add blocks, never remove them)")
    provenance = {"init_from": str(init_from), **{k: training.get(k) for k in ("command", "steps", "windows_seen",
                                                                               "tokens_seen", "parent")}}
    return provenance, (*(GROWABLE_FIELDS[k] for k in grown),
                        *grown_block_prefixes(config.n_layers, model_config.n_layers))


def _load_grown(model: Forecaster, start: Forecaster, grown: tuple[str, ...]) -> None:
    """Copy ``start``'s weights into ``model``; the modules it grows (weight prefixes ``grown``) start at zero, and
    appended blocks as the identity (:meth:`ResidualBlock.start_as_identity`). Any other mismatch is an error."""
    missing, unexpected = model.load_state_dict(start.state_dict(), strict=False)
    added = [k for k in missing if not k.startswith(grown)]
    if added or unexpected:
        raise TrainingError(f"init_from weights do not fit this model: missing {added}, unexpected {unexpected}")
    for block in model.backbone.blocks[len(start.backbone.blocks):]:
        block.start_as_identity()


def _export(module: PretrainModule, trainer: L.Trainer, out: Path, train_config: TrainConfig,
            resume_point: _ResumePoint, data_description: str, command: str | None, real: Corpus | None,
            validation: Corpus | None, parent: dict[str, Any] | None) -> Path:
    """Write the best (else last) weights as a tsfm checkpoint with the run's provenance, and the loss plot."""
    model = module.model
    best_path = out / "checkpoints" / "best.ckpt"
    best_score = best_step = None
    if best_path.is_file():
        state = torch.load(best_path, map_location="cpu", weights_only=False)
        weights = {k.removeprefix("model."): v for k, v in state["state_dict"].items()}
        model = Forecaster(module.model_config)
        model.load_state_dict(weights)
        callback = next(iter(v for k, v in state.get("callbacks", {}).items() if "ModelCheckpoint" in k), {})
        best_score = callback.get("best_model_score")
        best_score = None if best_score is None else float(best_score)
        best_step = state.get("global_step")
    final_loss = _final_train_loss(trainer, out)
    steps = trainer.global_step
    provenance = {
        "command": command,
        "train_config": dataclasses.asdict(train_config),
        "data": data_description,
        "real_series": len(real) if real is not None else 0,
        "validation_series": len(validation) if validation is not None else 0,
        "steps": steps,
        "windows_seen": steps * train_config.batch_size,
        "tokens_seen": steps * train_config.batch_size * module.tokens_per_window,
        "final_train_loss": final_loss,
        "best_val_loss": best_score,
        "best_step": best_step,
        "train_seconds": round(resume_point.elapsed(), 1),
        "device": _device_name(trainer),
        "devices": trainer.world_size,
        "num_parameters": model.num_parameters(),
        "torch": torch.__version__,
        "parent": parent,
    }
    path = save_model(model.float().cpu(), out / "model", training=provenance, dtype=torch.bfloat16,
                      max_shard_bytes=MAX_SHARD_BYTES)
    (out / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    _plot_losses(out)
    return path


def _final_train_loss(trainer: L.Trainer, out: Path) -> float | None:
    """The last training loss of the run: this call's, else the last one an earlier call logged. A call that resumes
    a run at its last step (the previous call's time budget ran out between the last step and the export) trains
    nothing, so holds no loss of its own, and its run would otherwise report none at all."""
    loss = trainer.callback_metrics.get("train_loss")
    if loss is not None:
        return float(loss)
    metrics = read_metrics(out)
    if "train_loss" not in metrics:
        return None
    logged = metrics["train_loss"].dropna()
    return None if logged.empty else float(logged.iloc[-1])


def _device_name(trainer: L.Trainer) -> str:
    """What trained this call, e.g. ``"NVIDIA H200"``, ``"2 x NVIDIA H200"`` or ``"cpu"``."""
    on_cuda = isinstance(trainer.accelerator, L.pytorch.accelerators.CUDAAccelerator)
    name = torch.cuda.get_device_name() if on_cuda else "cpu"
    return name if trainer.world_size == 1 else f"{trainer.world_size} x {name}"


def read_metrics(out: str | os.PathLike[str]) -> Any:
    """Every logged metric of a run (all calls: ``logs/version_*``), one row per step, as a DataFrame."""
    import pandas as pd

    frames = [pd.read_csv(p) for p in sorted(Path(out).glob("logs/version_*/metrics.csv"))]
    if not frames:
        return pd.DataFrame(columns=["step"])
    return pd.concat(frames, ignore_index=True).groupby("step", as_index=False).last()


def _plot_losses(out: Path) -> None:
    """``loss.png``: training loss (smoothed) and validation loss against the step."""
    metrics = read_metrics(out)
    if metrics.empty:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if "train_loss_step" in metrics or "train_loss" in metrics:
        column = "train_loss_step" if "train_loss_step" in metrics else "train_loss"
        train_rows = metrics.dropna(subset=[column])
        ax.plot(train_rows["step"], train_rows[column].rolling(20, min_periods=1).mean(), label="train (smoothed)")
    if "val_loss" in metrics:
        val_rows = metrics.dropna(subset=["val_loss"])
        ax.plot(val_rows["step"], val_rows["val_loss"], "o-", label="validation (held-out series)")
    ax.set_xlabel("step")
    ax.set_ylabel("pinball loss (scaled)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "loss.png", dpi=100)
    plt.close(fig)
