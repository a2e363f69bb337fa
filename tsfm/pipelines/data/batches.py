"""Training batches drawn where the model runs: real and synthetic series live on the device, every window is cut,
mixed, augmented and masked there in a few batched tensor ops.

Why: at context 2,048 a 10M-parameter model on an H200 consumes about 10k windows of 2,800 steps per second; cutting
them one by one in NumPy DataLoader workers cannot keep up (and synthetic series made on the CPU even less). Here the
real corpus is one flat tensor with per-series offsets, the synthetic pool is a block of the same buffer that is
regenerated chunk by chunk during training (so no synthetic series is seen more than a few times), and a batch is
a handful of gathers. The same code runs on CPU tensors, which is how the tests exercise it.

**Determinism and exact resume.** Nothing here carries hidden state between steps except the synthetic pool, and the
pool at step ``s`` is a pure function of ``(seed, s)``: chunk ``c`` was last regenerated in a known round with a
generator seeded by ``(seed, "pool", c, round)``. Batch ``s`` uses a generator seeded by ``(seed, "batch", s)``. So a
run resumed at step ``s`` (:meth:`BatchSampler.draw` with the restored step) sees exactly the batches the
uninterrupted run saw, without saving any sampler state.

**What a window is.** A series (dataset-balanced weights for real data) and a cut point are drawn; the context is up
to ``context_length`` steps before the cut, left-padded with NaN (its length is the longest available with
probability ``full_context_prob``, else uniform down to ``min_context``: the model meets short histories too); the
target is the ``prediction_length`` steps from the cut (NaN past the end). Augmentations, each on a share of windows:

- **TSMixup** (Chronos): a convex mix of 2..``mixup_max_k`` windows, each divided by its mean absolute context
  value, with flat-Dirichlet weights (normalised exponentials); where a component is missing the weights are
  renormalised over the others.
- **Stride**: the window reads every ``s``-th step (``s`` in 2..``max_stride``), turning e.g. hourly series into
  2-4-hourly ones (more frequencies from the same data).
- **Noise**: Gaussian noise of up to ``noise_max`` of the context's standard deviation.
- **Missing values**: a random share (up to ``missing_max``) of context steps set to NaN.
- **Contiguous patch masking**: runs of whole context patches hidden from the model (returned as a mask; the loss
  still scores them), which teaches the model to bridge gaps, as its masked future tokens must.

Scaling the amplitude or shifting the level of a window is not done: the model standardises every context
(``(x - mean) / std``), so both are exact no-ops for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from .corpus import Corpus

__all__ = ["SHARE_FIELDS", "Batch", "BatchConfig", "BatchSampler", "PriorFn", "fixed_batches"]

#: ``prior(n, length, generator) -> float32 [n, length]`` on ``generator.device`` (NaN allowed).
PriorFn = Callable[[int, int, torch.Generator], torch.Tensor]


class Batch(NamedTuple):
    """One training batch on the sampler's device."""

    context: torch.Tensor  # [B, context_length], NaN = missing / left padding
    target: torch.Tensor  # [B, prediction_length], NaN = nothing to score
    hidden_patches: torch.Tensor  # [B, context_length // patch_size] bool, True = hidden from the model
    series: torch.Tensor | None = None  # [B] int64: the series each window was cut from (its first component when
    # mixed): an index into the real corpus, or >= its length for the synthetic pool; lets a validation set be
    # broken down by dataset or frequency


#: The settings that are shares of windows, each in [0, 1] (``TrainConfig`` carries them too and checks them alike).
SHARE_FIELDS = ("full_context_prob", "synthetic_share", "mixup_prob", "stride_prob", "noise_prob", "missing_prob")


@dataclass(frozen=True)
class BatchConfig:
    """How windows are drawn (see the module docstring for each knob's meaning)."""

    batch_size: int
    context_length: int
    prediction_length: int
    patch_size: int = 32
    min_context: int = 8
    full_context_prob: float = 0.5
    synthetic_share: float = 0.5
    mixup_prob: float = 0.2
    mixup_max_k: int = 3
    stride_prob: float = 0.1
    max_stride: int = 4
    noise_prob: float = 0.1
    noise_max: float = 0.1
    missing_prob: float = 0.05
    missing_max: float = 0.3
    mask_ratio: float = 0.15
    max_mask_run: int = 4
    pool_size: int = 16384
    pool_length: int | None = None
    pool_chunks: int = 16
    refresh_every: int = 4

    def __post_init__(self) -> None:
        problems = []
        for name in ("batch_size", "context_length", "prediction_length", "patch_size", "min_context",
                     "mixup_max_k", "max_stride", "max_mask_run", "pool_chunks", "refresh_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        for name in SHARE_FIELDS:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                problems.append(f"{name} must be in [0, 1], got {value!r}")
        if not 0.0 <= self.mask_ratio < 1.0:
            problems.append(f"mask_ratio must be in [0, 1), got {self.mask_ratio!r}")
        if not problems and self.context_length % self.patch_size:
            problems.append(f"context_length ({self.context_length}) must be a multiple of patch_size "
                            f"({self.patch_size})")
        if not problems and self.min_context > self.context_length:
            problems.append(f"min_context ({self.min_context}) must be <= context_length ({self.context_length})")
        if self.pool_size < 0 or (self.pool_size and self.pool_size % self.pool_chunks):
            problems.append(f"pool_size ({self.pool_size}) must be a non-negative multiple of pool_chunks "
                            f"({self.pool_chunks})")
        if problems:
            raise ValueError("invalid BatchConfig: " + "; ".join(problems))

    @property
    def window_length(self) -> int:
        return self.context_length + self.prediction_length

    @property
    def series_length(self) -> int:
        """Steps per synthetic series: a full window by default, so a long context can be cut from it."""
        return self.pool_length or self.window_length


def _seed(*key: object) -> int:
    """A 63-bit seed from any key (stable across processes and platforms, unlike ``hash``)."""
    return int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:8], "little") >> 1


def _first_observed(values: torch.Tensor) -> torch.Tensor:
    """Index of the first finite value of each row of ``values [n, L]`` (L when none)."""
    finite = torch.isfinite(values)
    first = finite.to(torch.int8).argmax(dim=1)
    return torch.where(finite.any(dim=1), first, torch.full_like(first, values.shape[1]))


class BatchSampler:
    """Deterministic training batches from a real corpus and a refreshed synthetic pool, on one device.

    Args:
        config: window and augmentation settings.
        real: the real training corpus (may be ``None`` or empty: synthetic only).
        prior: synthetic generator (``PriorFn``); ``None`` means no synthetic pool (real only).
        seed: everything random derives from it.
        device: where the data lives and batches are made.
    """

    def __init__(
        self,
        config: BatchConfig,
        real: Corpus | None = None,
        *,
        prior: PriorFn | None = None,
        seed: int = 0,
        device: torch.device | str = "cpu",
    ) -> None:
        self.config, self.prior, self.seed = config, prior, seed
        self.device = torch.device(device)
        real = real if real is not None else Corpus()
        use_pool = prior is not None and config.pool_size > 0 and config.synthetic_share > 0
        if not len(real) and not use_pool:
            raise ValueError("BatchSampler needs real series, a synthetic prior with pool_size > 0, or both")
        self.num_real = len(real)
        self.pool_size = config.pool_size if use_pool else 0
        pool_length = config.series_length
        real_lengths = np.asarray([s.size for s in real.series], dtype=np.int64)
        lengths = np.concatenate([real_lengths, np.full(self.pool_size, pool_length, dtype=np.int64)])
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        flat = np.concatenate(real.series) if len(real) else np.zeros(0, dtype=np.float32)
        self.values = torch.empty(int(lengths.sum()), dtype=torch.float32, device=self.device)
        self.values[: flat.size] = torch.from_numpy(flat).to(self.device)
        self.starts = torch.from_numpy(starts).to(self.device)
        self._host_starts = starts  # read by the pool refresh without a device-to-host copy (a sync on a GPU)
        self.lengths = torch.from_numpy(lengths).to(self.device)
        first_real = [int(np.argmax(np.isfinite(s))) for s in real.series]
        self.first = torch.tensor(first_real + [0] * self.pool_size, dtype=torch.int64, device=self.device)
        # the first step a window may forecast: a held-out series end is forecast from the history before it
        self.score_from = torch.tensor(list(real.score_from) + [0] * self.pool_size, dtype=torch.int64,
                                       device=self.device)
        share = config.synthetic_share if self.num_real else 1.0
        if not self.pool_size:
            share = 0.0
        weights = np.concatenate([
            real.weights / real.weights.sum() * (1.0 - share) if len(real) else np.zeros(0),
            np.full(self.pool_size, share / max(self.pool_size, 1)),
        ])
        self.weights = torch.from_numpy(weights).to(self.device, torch.float32)
        self._round: int | None = None  # pool refresh round the pool is at (None: not built yet)

    # ------------------------------------------------------------------------------------------ synthetic pool --

    def _generator(self, *key: object) -> torch.Generator:
        generator = torch.Generator(device=self.device)
        generator.manual_seed(_seed(self.seed, *key))
        return generator

    def _fill_chunk(self, chunk: int, round_: int) -> None:
        """Regenerate pool chunk ``chunk`` as round ``round_`` made it (round 0: the initial pool)."""
        per_chunk = self.pool_size // self.config.pool_chunks
        length = self.config.series_length
        series = self.prior(per_chunk, length, self._generator("pool", chunk, round_))
        if series.shape != (per_chunk, length):
            raise ValueError(f"prior returned shape {tuple(series.shape)}, expected {(per_chunk, length)}")
        index = self.num_real + chunk * per_chunk
        begin = int(self._host_starts[index])
        self.values[begin : begin + per_chunk * length] = series.to(self.values).reshape(-1)
        self.first[index : index + per_chunk] = _first_observed(series)

    def _last_round(self, chunk: int, round_: int) -> int:
        """The latest refresh round ``<= round_`` that regenerated ``chunk`` (round r >= 1 refreshes chunk
        ``(r - 1) % pool_chunks``; 0 means the chunk is still as first built)."""
        chunks = self.config.pool_chunks
        if round_ < chunk + 1:
            return 0
        return chunk + 1 + (round_ - chunk - 1) // chunks * chunks

    def sync_pool(self, step: int) -> None:
        """Bring the pool to the state it has at ``step`` (cheap when called for consecutive steps)."""
        if not self.pool_size:
            return
        target = step // self.config.refresh_every
        chunks = self.config.pool_chunks
        if self._round is None or target < self._round or target - self._round >= chunks:
            for chunk in range(chunks):
                self._fill_chunk(chunk, self._last_round(chunk, target))
        else:
            for round_ in range(self._round + 1, target + 1):
                self._fill_chunk((round_ - 1) % chunks, round_)
        self._round = target

    # ------------------------------------------------------------------------------------------------ batches --

    def draw(self, step: int) -> Batch:
        """Batch number ``step``: the same for the same ``(seed, step)``, however the run got there."""
        self.sync_pool(step)
        cfg = self.config
        g = self._generator("batch", step)
        batch, k_max = cfg.batch_size, cfg.mixup_max_k

        def uniform(*shape: int) -> torch.Tensor:
            return torch.rand(*shape, generator=g, device=self.device)

        picks = torch.multinomial(self.weights, batch * k_max, replacement=True, generator=g).view(batch, k_max)
        lengths, first, starts = self.lengths[picks], self.first[picks], self.starts[picks]
        stride = torch.where(uniform(batch) < cfg.stride_prob,
                             torch.randint(2, cfg.max_stride + 1, (batch,), generator=g, device=self.device), 1)
        stride = stride[:, None].expand(batch, k_max)
        # A stride the series is too short for falls back to 1.
        stride = torch.where(lengths - first > stride * (cfg.min_context + 1), stride, torch.ones_like(stride))
        low = (first + stride * cfg.min_context).maximum(self.score_from[picks]).clamp(max=lengths - 1)
        cut = (low + (uniform(batch, k_max) * (lengths - low).clamp(min=1)).long()).minimum(lengths - 1)
        longest = ((cut[:, 0] - first[:, 0]) // stride[:, 0]).clamp(min=1, max=cfg.context_length)
        shorter = cfg.min_context + (uniform(batch) * (longest - cfg.min_context + 1).clamp(min=1)).long()
        context_steps = torch.where(uniform(batch) < cfg.full_context_prob, longest, shorter.clamp(max=longest))

        offsets = torch.arange(-cfg.context_length, cfg.prediction_length, device=self.device)
        positions = cut[..., None] + stride[..., None] * offsets  # [B, K, W]
        valid = (offsets >= -context_steps[:, None, None]) & (positions >= 0) & (positions < lengths[..., None])
        flat_index = starts[..., None] + positions.clamp(min=0).minimum(lengths[..., None] - 1)
        windows = torch.where(valid, self.values[flat_index], torch.nan)  # [B, K, W]

        windows = self._mix(windows, g, uniform)
        context, target = windows[:, : cfg.context_length], windows[:, cfg.context_length :]
        context = self._noise_and_missing(context, g, uniform)
        return Batch(context.contiguous(), target.contiguous(), self._hidden_patches(g), picks[:, 0].contiguous())

    def _mix(self, windows: torch.Tensor, g: torch.Generator, uniform: Callable[..., torch.Tensor]) -> torch.Tensor:
        """TSMixup over the K drawn windows of each row; rows not chosen for mixing keep their first window."""
        cfg = self.config
        batch, k_max, _ = windows.shape
        if k_max == 1 or cfg.mixup_prob == 0:
            return windows[:, 0]
        components = torch.where(uniform(batch) < cfg.mixup_prob,
                                 torch.randint(2, k_max + 1, (batch,), generator=g, device=self.device), 1)
        context = windows[..., : cfg.context_length]
        mean_abs = torch.nanmean(context.abs(), dim=-1, keepdim=True)
        mean_abs = torch.where(torch.isfinite(mean_abs) & (mean_abs > 0), mean_abs, torch.ones_like(mean_abs))
        weights = -torch.log(uniform(batch, k_max).clamp(min=1e-12))  # flat Dirichlet after normalising
        weights = weights * (torch.arange(k_max, device=self.device) < components[:, None])
        observed = torch.isfinite(windows)
        w = torch.where(observed, weights[..., None], 0.0)
        total = w.sum(dim=1)
        mixed = (w * torch.where(observed, windows / mean_abs, 0.0)).sum(dim=1) / total.clamp(min=1e-12)
        mixed = torch.where(total > 0, mixed, torch.nan)
        return torch.where(components[:, None] > 1, mixed, windows[:, 0])

    def _noise_and_missing(self, context: torch.Tensor, g: torch.Generator,
                           uniform: Callable[..., torch.Tensor]) -> torch.Tensor:
        cfg = self.config
        batch, length = context.shape
        if cfg.noise_prob > 0:
            observed = torch.isfinite(context)
            mean = torch.nanmean(context, dim=1, keepdim=True)
            std = torch.where(observed, context - mean, 0.0).square().sum(1, keepdim=True)
            std = (std / observed.sum(1, keepdim=True).clamp(min=1)).sqrt()
            level = (uniform(batch, 1) < cfg.noise_prob) * uniform(batch, 1) * cfg.noise_max * std
            context = context + level * torch.randn(batch, length, generator=g, device=self.device)
        if cfg.missing_prob > 0:
            rate = (uniform(batch, 1) < cfg.missing_prob) * uniform(batch, 1) * cfg.missing_max
            context = torch.where(uniform(batch, length) < rate, torch.nan, context)
        return context

    def _hidden_patches(self, g: torch.Generator) -> torch.Tensor:
        """Contiguous patch masking: runs of 1..max_mask_run patches, about ``mask_ratio`` of the context."""
        cfg = self.config
        patches = cfg.context_length // cfg.patch_size
        hidden = torch.zeros(cfg.batch_size, patches, dtype=torch.bool, device=self.device)
        if cfg.mask_ratio == 0:
            return hidden
        longest = min(cfg.max_mask_run, patches)
        runs = max(1, round(cfg.mask_ratio * patches / ((1 + longest) / 2)))
        run_length = torch.randint(1, longest + 1, (cfg.batch_size, runs, 1), generator=g, device=self.device)
        run_start = torch.randint(0, patches, (cfg.batch_size, runs, 1), generator=g, device=self.device)
        position = torch.arange(patches, device=self.device)
        return ((position >= run_start) & (position < run_start + run_length)).any(dim=1)


def fixed_batches(sampler: BatchSampler, count: int) -> list[Batch]:
    """``count`` batches drawn once (steps 0..count-1), e.g. a validation set that stays the same all run."""
    return [sampler.draw(step) for step in range(count)]

