"""The training sampler: endless random (context, target) windows from real or freshly generated series.

Two ``IterableDataset``s yield the same dicts, so the trainer can interleave them:

- ``WindowSampler`` draws windows from a fixed list of 1-D series (ragged lengths, NaN allowed).
- ``SyntheticStream`` draws windows from a pool of synthetic series that is refreshed as training runs, so the
  model keeps seeing new series without paying the generation cost on every window.

Each window is ``{"context": float32 [context_length], "target": float32 [prediction_length]}``: the context is the
``c`` steps right before a cut point, left-padded with NaN to ``context_length``; the target is the
``prediction_length`` steps from the cut point on, NaN past the end of the series. ``torch``'s default collate
stacks these into ``[batch, context_length]`` and ``[batch, prediction_length]``. Scaling, patching and masking are
the model's business, not the sampler's.

Random streams are derived from ``(seed, epoch, rank, worker)``, so DataLoader workers and distributed ranks never
repeat each other's windows, and a run is reproducible for a fixed number of workers.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from tsfm.pipelines.data.synthetic import iter_synthetic_series

__all__ = ["SyntheticStream", "WindowSampler", "draw_window"]

#: Uniform draws of the cut point tried before falling back to anchoring it on an observed target value.
_CUT_TRIES = 8


def draw_window(
    series: np.ndarray,
    rng: np.random.Generator,
    *,
    context_length: int,
    prediction_length: int,
    min_context: int,
    full_context_prob: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    """One random ``(context, target)`` window (float32) of a 1-D series of at least ``min_context + 1`` steps with
    an observed value at or after step ``min_context``.

    The cut point ``t`` is uniform over the steps in ``[min_context, len - 1]`` whose next ``prediction_length``
    steps hold an observed value (rejection sampling; anchored on an observed value if that keeps failing, as for
    mostly-missing series). The context length is the longest available (``min(context_length, t)``) with
    probability ``full_context_prob``, as at evaluation time, and else uniform in ``[min_context, that]`` so the
    model also learns from short histories.
    """
    cut = _draw_cut(series, rng, prediction_length, min_context)
    longest = min(context_length, cut)
    size = longest if rng.random() < full_context_prob else int(rng.integers(min_context, longest + 1))
    context = np.full(context_length, np.nan, dtype=np.float32)
    context[context_length - size :] = series[cut - size : cut]
    target = np.full(prediction_length, np.nan, dtype=np.float32)
    observed = series[cut : cut + prediction_length]
    target[: observed.size] = observed
    return context, target


def _draw_cut(series: np.ndarray, rng: np.random.Generator, prediction_length: int, min_context: int) -> int:
    """A cut point in ``[min_context, len - 1]`` with at least one observed target step."""
    for _ in range(_CUT_TRIES):
        cut = int(rng.integers(min_context, series.size))
        if np.isfinite(series[cut : cut + prediction_length]).any():
            return cut
    observed = min_context + np.flatnonzero(np.isfinite(series[min_context:]))
    anchor = int(rng.choice(observed))
    return int(rng.integers(max(min_context, anchor - prediction_length + 1), anchor + 1))


def _is_usable(series: np.ndarray, min_context: int) -> bool:
    """Long enough for ``min_context`` steps of context and an observed step after them."""
    return series.size > min_context and bool(np.isfinite(series[min_context:]).any())


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _distributed_rank() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return 0


class _WindowStream(IterableDataset):
    """What both datasets share: argument checks, per-worker seeding, the epoch length and the window dicts."""

    def __init__(
        self,
        *,
        context_length: int,
        prediction_length: int,
        min_context: int | None,
        patch_size: int,
        seed: int,
        full_context_prob: float,
        samples_per_epoch: int | None,
    ) -> None:
        super().__init__()
        _check_int("patch_size", patch_size, 1)
        _check_int("context_length", context_length, 1)
        if context_length % patch_size:
            raise ValueError(f"context_length must be a multiple of patch_size={patch_size}, got {context_length}")
        _check_int("prediction_length", prediction_length, 1)
        min_context = patch_size if min_context is None else min_context
        _check_int("min_context", min_context, 1)
        if min_context > context_length:
            raise ValueError(f"min_context must be <= context_length={context_length}, got {min_context}")
        _check_int("seed", seed, 0)
        if not 0.0 <= full_context_prob <= 1.0:
            raise ValueError(f"full_context_prob must be in [0, 1], got {full_context_prob!r}")
        if samples_per_epoch is not None:
            _check_int("samples_per_epoch", samples_per_epoch, 0)
        self.context_length, self.prediction_length = context_length, prediction_length
        self.min_context, self.patch_size, self.seed = min_context, patch_size, seed
        self.full_context_prob, self.samples_per_epoch = full_context_prob, samples_per_epoch
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Draw a new stream in the next pass (takes effect when DataLoader workers are (re)started)."""
        _check_int("epoch", epoch, 0)
        self.epoch = epoch

    def _entropy(self) -> tuple[list[int], int, int]:
        """Seed entropy unique to this (epoch, rank, worker), this worker's id and the number of workers."""
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        return [self.seed, self.epoch, _distributed_rank(), worker], worker, workers

    def _count(self, worker: int, workers: int) -> Iterator[int]:
        """This worker's share of ``samples_per_epoch`` (the shares add up to it); endless if it is None."""
        if self.samples_per_epoch is None:
            return itertools.count()
        return iter(range(self.samples_per_epoch // workers + (worker < self.samples_per_epoch % workers)))

    def _window(self, series: np.ndarray, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        context, target = draw_window(
            series,
            rng,
            context_length=self.context_length,
            prediction_length=self.prediction_length,
            min_context=self.min_context,
            full_context_prob=self.full_context_prob,
        )
        return {"context": torch.from_numpy(context), "target": torch.from_numpy(target)}


class WindowSampler(_WindowStream):
    """Random training windows from a fixed list of series.

    Args:
        series: 1-D float arrays, ragged lengths, NaN for missing values. Series too short for ``min_context`` steps
            of context plus one observed step after them are skipped (there must be at least one usable series).
        context_length: context steps per window, a multiple of ``patch_size``; shorter contexts are left-padded
            with NaN.
        prediction_length: target steps per window.
        min_context: fewest observed-or-missing context steps a window has (default: one patch).
        patch_size: the model's patch length ``P``.
        seed: base seed; each (epoch, rank, worker) draws its own stream from it.
        weights: relative chance of drawing each series (e.g. per dataset size); uniform if None.
        full_context_prob: chance that a window uses the longest context available rather than a random shorter one.
        samples_per_epoch: windows per pass over the dataset in this process (split across its workers);
            endless if None.

    Example:
        >>> sampler = WindowSampler([np.arange(500.0)], context_length=64, prediction_length=16, seed=0)
        >>> window = next(iter(sampler))
        >>> window["context"].shape, window["target"].shape
        (torch.Size([64]), torch.Size([16]))
    """

    def __init__(
        self,
        series: Sequence[np.ndarray],
        *,
        context_length: int,
        prediction_length: int,
        min_context: int | None = None,
        patch_size: int = 32,
        seed: int,
        weights: Sequence[float] | np.ndarray | None = None,
        full_context_prob: float = 0.5,
        samples_per_epoch: int | None = None,
    ) -> None:
        super().__init__(
            context_length=context_length,
            prediction_length=prediction_length,
            min_context=min_context,
            patch_size=patch_size,
            seed=seed,
            full_context_prob=full_context_prob,
            samples_per_epoch=samples_per_epoch,
        )
        arrays = [np.asarray(s, dtype=np.float32) for s in series]
        for i, array in enumerate(arrays):
            if array.ndim != 1:
                raise ValueError(f"series[{i}] must be 1-D, got shape {array.shape}")
        usable = np.array([_is_usable(a, self.min_context) for a in arrays], dtype=bool)
        probs = _series_probs(weights, len(arrays)) * usable
        if probs.sum() <= 0:
            raise ValueError(
                f"series has no usable series (at least min_context + 1 = {self.min_context + 1} steps with an "
                "observed value after the first min_context, and a positive weight)"
            )
        self._indices = np.flatnonzero(probs > 0)
        # A cumulative table: drawing a series is a binary search, not an O(#series) pass as in rng.choice(p=...).
        self._cdf = np.cumsum(probs[self._indices]) / probs[self._indices].sum()
        self.series = arrays

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        entropy, worker, workers = self._entropy()
        rng = np.random.default_rng(entropy)
        for _ in self._count(worker, workers):
            pick = min(int(np.searchsorted(self._cdf, rng.random(), side="right")), self._indices.size - 1)
            index = self._indices[pick]
            yield self._window(self.series[index], rng)


def _series_probs(weights: Sequence[float] | np.ndarray | None, count: int) -> np.ndarray:
    if weights is None:
        return np.ones(count)
    probs = np.asarray(weights, dtype=np.float64)
    if probs.shape != (count,) or not np.all(np.isfinite(probs)) or np.any(probs < 0):
        raise ValueError(f"weights must be {count} finite non-negative numbers (one per series), got {probs.shape}")
    return probs


class SyntheticStream(_WindowStream):
    """Endless training windows from fresh synthetic series (``tsfm.pipelines.data.synthetic.iter_synthetic_series``).

    Generating a series (a KernelSynth Cholesky at length 1024 costs tens of ms) is far dearer than cutting a
    window, so each worker keeps a pool of up to ``pool_size`` series and cuts windows from random pool members.
    The pool starts with ``min(pool_size, initial_pool)`` series so training starts within seconds, gains one new
    series every ``grow_every`` windows until full, and from then on replaces one random member every
    ``refresh_every`` windows. Each series is thus used for about ``pool_size * refresh_every`` windows in total
    before it is dropped; generation costs ``1 / refresh_every`` of a series per window.

    Args:
        context_length, prediction_length, min_context, patch_size, seed, full_context_prob, samples_per_epoch:
            as for ``WindowSampler``.
        length: steps per synthetic series (> ``min_context``).
        pool_size: most series a worker keeps.
        mix: generator shares for ``iter_synthetic_series`` (default: its ``DEFAULT_MIX``).
        initial_pool, grow_every, refresh_every: the pool schedule above.
    """

    def __init__(
        self,
        *,
        context_length: int,
        prediction_length: int,
        min_context: int | None = None,
        patch_size: int = 32,
        seed: int,
        length: int = 1024,
        pool_size: int = 512,
        mix: Mapping[str, float] | None = None,
        initial_pool: int = 64,
        grow_every: int = 4,
        refresh_every: int = 64,
        full_context_prob: float = 0.5,
        samples_per_epoch: int | None = None,
    ) -> None:
        super().__init__(
            context_length=context_length,
            prediction_length=prediction_length,
            min_context=min_context,
            patch_size=patch_size,
            seed=seed,
            full_context_prob=full_context_prob,
            samples_per_epoch=samples_per_epoch,
        )
        _check_int("length", length, self.min_context + 1)
        for name, value in (
            ("pool_size", pool_size),
            ("initial_pool", initial_pool),
            ("grow_every", grow_every),
            ("refresh_every", refresh_every),
        ):
            _check_int(name, value, 1)
        iter_synthetic_series(length, seed, mix=mix)  # checks mix now, not in a worker
        self.length, self.pool_size, self.mix = length, pool_size, mix
        self.initial_pool, self.grow_every, self.refresh_every = initial_pool, grow_every, refresh_every

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        entropy, worker, workers = self._entropy()
        rng = np.random.default_rng([*entropy, 0])
        fresh = iter_synthetic_series(self.length, [*entropy, 1], mix=self.mix)
        pool = [next(fresh) for _ in range(min(self.pool_size, self.initial_pool))]
        for drawn in self._count(worker, workers):
            self._update_pool(pool, fresh, drawn, rng)
            yield self._window(pool[int(rng.integers(len(pool)))], rng)

    def _update_pool(
        self, pool: list[np.ndarray], fresh: Iterator[np.ndarray], drawn: int, rng: np.random.Generator
    ) -> None:
        """Grow the pool while it is not full, then swap one random member for a new series now and then."""
        if drawn == 0:
            return
        if len(pool) < self.pool_size:
            if drawn % self.grow_every == 0:
                pool.append(next(fresh))
        elif drawn % self.refresh_every == 0:
            pool[int(rng.integers(len(pool)))] = next(fresh)
