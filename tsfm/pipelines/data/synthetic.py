"""Synthetic pretraining series: KernelSynth, cheap structured generators and TSMixup.

Pretraining never sees benchmark data (DESIGN §5), so most of what the model learns about trends, cycles, noise and
intermittency comes from here:

- **KernelSynth** (Chronos, Ansari et al. 2024, appendix): draw 1-5 kernels from a bank of Gaussian-process kernels
  (linear, RBF, periodic at data-relevant periods, rational quadratic, white noise, constant), join them with random
  ``+`` / ``*`` and sample one path from ``N(0, K)``.
- **Structured generators**: piecewise trends with level shifts, multiplicative seasonality, intermittent demand,
  random walks and spikes; shapes that a GP prior rarely produces, at a fraction of its cost.
- **TSMixup**: convex (Dirichlet) mixtures of up to ``k`` mean-abs-scaled windows of given series.

Every generator is deterministic per ``seed`` and *index-addressable*: series ``i`` is drawn from its own random
stream (``SeedSequence(seed, spawn_key=(i,))``), so ``kernel_synth(10, seed=s)[:3] == kernel_synth(3, seed=s)`` and a
lazy stream yields the same series as the batch function. Arrays are numpy (torch only factorises covariances);
this module knows nothing of windows or training (that is ``tsfm.pipelines.data.sampler``).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from tqdm.auto import tqdm

__all__ = [
    "DEFAULT_MIX",
    "GENERATORS",
    "KERNEL_BANK",
    "PERIODS",
    "CompositeKernel",
    "ConstantKernel",
    "Kernel",
    "LinearKernel",
    "PeriodicKernel",
    "RBFKernel",
    "RationalQuadraticKernel",
    "WhiteKernel",
    "as_matrix",
    "iter_kernel_synth",
    "iter_synthetic_series",
    "kernel_synth",
    "random_kernel",
    "sample_gp",
    "synthetic_series",
    "ts_mixup",
]

SeedLike = int | Sequence[int]
Generator = Callable[[np.random.Generator, int], np.ndarray]

#: Seasonal periods in steps that real data has: quarter-hourly/half-hourly/hourly days (96, 48, 24), hourly weeks
#: (168, 336, 672), days in a week/fortnight/month/year (7, 14, 30, 60, 365, 730), weeks and months in a year
#: (52, 26, 12, 6, 4), business days (5, 10).
PERIODS: tuple[int, ...] = (4, 5, 6, 7, 10, 12, 14, 24, 26, 30, 48, 52, 60, 96, 168, 336, 365, 672, 730)

#: Series generated per call before a progress bar is shown.
_PROGRESS_FROM = 1000


# ----------------------------------------------------------------------------------------------------- kernels --


class Kernel(Protocol):
    """A covariance function on the grid ``t = 0..length-1``.

    ``covariance(length)`` returns the lag profile ``k(|s - t|)`` (shape ``[length]``) for a stationary kernel and
    the full matrix (``[length, length]``) otherwise: sums and products of stationary kernels stay stationary, so a
    composition builds one ``O(length)`` profile and only one matrix, instead of one matrix per term.
    """

    def covariance(self, length: int) -> np.ndarray: ...


@dataclass(frozen=True)
class LinearKernel:
    """``bias² + (x_s - offset)(x_t - offset)`` on ``x = t / length``: a straight line with a random slope through
    ``offset`` (0: starts at 0, 1: ends at 0) plus a random level of scale ``bias``."""

    offset: float = 0.0
    bias: float = 0.0

    def covariance(self, length: int) -> np.ndarray:
        x = np.arange(length) / length - self.offset
        return self.bias**2 + np.outer(x, x)


@dataclass(frozen=True)
class RBFKernel:
    """``exp(-d² / 2l²)`` with ``l`` a fraction of the series length: smooth wiggles (short ``l``) to slow drifts."""

    length_scale: float

    def covariance(self, length: int) -> np.ndarray:
        d = np.arange(length) / length
        return np.exp(-0.5 * (d / self.length_scale) ** 2)


@dataclass(frozen=True)
class PeriodicKernel:
    """``exp(-2 sin²(π d / period) / l²)`` with ``period`` in steps (not scaled with the length, so a 24-step cycle
    stays a day of hourly data); a short ``l`` gives peaky many-harmonic cycles, a long one near-sinusoids."""

    period: float
    length_scale: float = 1.0

    def covariance(self, length: int) -> np.ndarray:
        d = np.arange(length)
        return np.exp(-2.0 * (np.sin(np.pi * d / self.period) / self.length_scale) ** 2)


@dataclass(frozen=True)
class RationalQuadraticKernel:
    """``(1 + d² / (2 α l²))^-α``: a scale mixture of RBFs, i.e. variation at several speeds at once."""

    alpha: float
    length_scale: float = 1.0

    def covariance(self, length: int) -> np.ndarray:
        d = np.arange(length) / length
        return (1.0 + d**2 / (2.0 * self.alpha * self.length_scale**2)) ** -self.alpha


@dataclass(frozen=True)
class WhiteKernel:
    """``noise`` on the diagonal: i.i.d. observation noise (and, under ``*``, a noise that masks the other term)."""

    noise: float

    def covariance(self, length: int) -> np.ndarray:
        profile = np.zeros(length)
        profile[0] = self.noise
        return profile


@dataclass(frozen=True)
class ConstantKernel:
    """``value`` everywhere: a random level under ``+``, a random amplitude under ``*``."""

    value: float = 1.0

    def covariance(self, length: int) -> np.ndarray:
        return np.full(length, self.value, dtype=np.float64)


@dataclass(frozen=True)
class CompositeKernel:
    """``kernels[0] ops[0] kernels[1] ops[1] ...`` evaluated left to right (as Chronos' ``reduce``)."""

    kernels: tuple[Kernel, ...]
    ops: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.kernels:
            raise ValueError("kernels must not be empty")
        if len(self.ops) != len(self.kernels) - 1 or any(op not in "+*" for op in self.ops):
            raise ValueError(f"ops must be {len(self.kernels) - 1} of '+' / '*', got {self.ops}")

    def covariance(self, length: int) -> np.ndarray:
        cov = self.kernels[0].covariance(length)
        for op, kernel in zip(self.ops, self.kernels[1:], strict=True):
            cov = _combine(cov, kernel.covariance(length), op)
        return cov

    def __str__(self) -> str:
        text = repr(self.kernels[0])
        for op, kernel in zip(self.ops, self.kernels[1:], strict=True):
            text = f"({text} {op} {kernel!r})"
        return text


def _combine(a: np.ndarray, b: np.ndarray, op: str) -> np.ndarray:
    """Join two covariances; stays a lag profile while both are profiles."""
    if a.ndim == 2 or b.ndim == 2:
        a, b = as_matrix(a), as_matrix(b)
    return a + b if op == "+" else a * b


def as_matrix(cov: np.ndarray) -> np.ndarray:
    """The full covariance matrix of a lag profile (a symmetric Toeplitz matrix); matrices pass through."""
    if cov.ndim == 2:
        return cov
    length = cov.shape[0]
    mirrored = np.concatenate([cov[::-1], cov[1:]])  # mirrored[length - 1 + k] = cov[|k|]
    return np.lib.stride_tricks.sliding_window_view(mirrored, length)[::-1]


def _build_bank() -> tuple[tuple[Kernel, ...], np.ndarray]:
    """The kernel bank and the probability of drawing each entry.

    Families are drawn with fixed shares and entries uniformly within a family, so adding a period does not make
    series more periodic. Shares follow Chronos' bank roughly (periodic dominates), with more room for trends.
    """
    families: dict[str, tuple[float, list[Kernel]]] = {
        "periodic": (0.45, [PeriodicKernel(p, ls) for p in PERIODS for ls in (0.5, 1.0, 2.0)]),
        "linear": (0.12, [LinearKernel(c, b) for c in (0.0, 0.5, 1.0) for b in (0.0, 1.0)] + [LinearKernel(0.0, 10.0)]),
        "rbf": (0.15, [RBFKernel(ls) for ls in (0.01, 0.03, 0.1, 0.3, 1.0, 10.0)]),
        "rational_quadratic": (0.12, [RationalQuadraticKernel(a, ls) for a in (0.1, 1.0, 10.0) for ls in (0.1, 1.0)]),
        "white": (0.10, [WhiteKernel(n) for n in (0.01, 0.1, 1.0)]),
        "constant": (0.06, [ConstantKernel(1.0)]),
    }
    kernels = [k for _, members in families.values() for k in members]
    probs = np.array([share / len(members) for share, members in families.values() for _ in members])
    return tuple(kernels), probs / probs.sum()


#: Every kernel KernelSynth draws from; ``_BANK_PROBS`` holds the matching draw probabilities.
KERNEL_BANK, _BANK_PROBS = _build_bank()


def random_kernel(rng: np.random.Generator, *, max_kernels: int = 5) -> CompositeKernel:
    """KernelSynth's kernel: ``j ~ U{1..max_kernels}`` bank entries (with replacement) joined by random ``+``/``*``."""
    count = int(rng.integers(1, max_kernels + 1))
    picks = rng.choice(len(KERNEL_BANK), size=count, p=_BANK_PROBS)
    ops = rng.choice(["+", "*"], size=count - 1)
    return CompositeKernel(tuple(KERNEL_BANK[i] for i in picks), tuple(str(op) for op in ops))


def _cholesky(cov: np.ndarray) -> torch.Tensor:
    """A factor ``L`` with ``L Lᵀ ≈ cov`` (float64).

    Compositions are often numerically singular (a constant or a long RBF is rank-deficient), so a relative jitter
    is added and grown until Cholesky succeeds; the eigen-decomposition is the last resort. The jitter adds noise of
    about ``1e-2`` of the series' scale at most (``1e-4`` typically), far below anything a forecaster resolves.

    torch rather than numpy does the factorisation because torch's thread count is what DataLoader workers limit
    (to one each): numpy's OpenBLAS would start a thread per core in every worker and oversubscribe the CPU.
    """
    matrix = torch.from_numpy(np.ascontiguousarray(cov, dtype=np.float64))
    scale = max(float(matrix.diagonal().mean()), 1e-12)
    eye = torch.eye(matrix.shape[0], dtype=torch.float64)
    for jitter in (1e-8, 1e-6, 1e-4):
        factor, info = torch.linalg.cholesky_ex(matrix + (jitter * scale) * eye)
        if int(info) == 0:
            return factor
    values, vectors = torch.linalg.eigh(matrix)
    return vectors * values.clamp(min=0.0).sqrt()


def sample_gp(kernel: Kernel, length: int, rng: np.random.Generator) -> np.ndarray:
    """One path (float64, ``[length]``) of the zero-mean Gaussian process with covariance ``kernel``."""
    factor = _cholesky(as_matrix(kernel.covariance(length)))
    return (factor @ torch.from_numpy(rng.standard_normal(length))).numpy()


def _kernel_synth_one(rng: np.random.Generator, length: int) -> np.ndarray:
    return sample_gp(random_kernel(rng), length, rng)


# ---------------------------------------------------------------------------------------- structured generators --


def _noise_scale(rng: np.random.Generator) -> float:
    """A log-uniform noise level: near-clean and very noisy series both occur."""
    return float(np.exp(rng.uniform(np.log(0.01), np.log(0.5))))


def _seasonal_pattern(rng: np.random.Generator, length: int, period: int) -> np.ndarray:
    """A random cycle of ``period`` steps: 1-4 harmonics with random amplitudes and phases, peak scaled to 1."""
    t = np.arange(length)
    pattern = np.zeros(length)
    for harmonic in range(1, int(rng.integers(1, 5)) + 1):
        phase = rng.uniform(0, 2 * np.pi)
        pattern += rng.uniform(0.2, 1.0) / harmonic * np.sin(2 * np.pi * harmonic * t / period + phase)
    return pattern / max(np.abs(pattern).max(), 1e-12)


def _period(rng: np.random.Generator, length: int) -> int:
    """A data-relevant period that fits at least twice in the series."""
    fitting = [p for p in PERIODS if 2 * p <= length] or [2]
    return int(rng.choice(fitting))


def _trend_level_shifts(rng: np.random.Generator, length: int) -> np.ndarray:
    """Continuous piecewise-linear trend (0-4 slope changes) with 0-3 level shifts and Gaussian noise."""
    breaks = np.sort(rng.integers(1, length, size=int(rng.integers(0, 5))))
    slopes = rng.normal(0.0, 1.0, size=breaks.size + 1) / length
    step_slope = slopes[np.searchsorted(breaks, np.arange(length), side="right")]
    series = np.cumsum(step_slope) + rng.normal(0.0, 3.0)
    for at in rng.integers(1, length, size=int(rng.integers(0, 4))):
        series[at:] += rng.normal(0.0, 0.5)
    return series + rng.normal(0.0, _noise_scale(rng) * 0.3, size=length)


def _seasonal_multiplicative(rng: np.random.Generator, length: int) -> np.ndarray:
    """Positive level with a trend, times ``1 + a·season`` (sometimes two seasons), times log-normal noise:
    amplitude grows with the level, as in sales and traffic."""
    t = np.arange(length) / length
    level = rng.uniform(1.0, 100.0) * np.clip(1.0 + rng.uniform(-0.5, 1.0) * t, 0.1, None)
    season = 1.0 + rng.uniform(0.1, 0.8) * _seasonal_pattern(rng, length, _period(rng, length))
    if rng.random() < 0.3:
        season *= 1.0 + rng.uniform(0.05, 0.4) * _seasonal_pattern(rng, length, _period(rng, length))
    return level * season * np.exp(rng.normal(0.0, _noise_scale(rng) * 0.5, size=length))


def _intermittent(rng: np.random.Generator, length: int) -> np.ndarray:
    """Sparse demand: mostly zeros, and ``1 + Poisson(λ)`` units when demand occurs (rate sometimes seasonal)."""
    occurrence = np.full(length, rng.uniform(0.03, 0.5))
    if rng.random() < 0.3:
        occurrence *= 1.0 + 0.8 * _seasonal_pattern(rng, length, _period(rng, length))
    demand = rng.random(length) < np.clip(occurrence, 0.0, 1.0)
    sizes = 1.0 + rng.poisson(np.exp(rng.uniform(np.log(0.5), np.log(20.0))), size=length)
    return np.where(demand, sizes, 0.0)


def _random_walk(rng: np.random.Generator, length: int) -> np.ndarray:
    """Heavy-tailed AR(1) with drift: a pure random walk half the time, else mean-reverting; sometimes
    exponentiated, as prices are."""
    phi = 1.0 if rng.random() < 0.5 else rng.uniform(0.8, 0.999)
    steps = rng.standard_t(rng.uniform(2.5, 30.0), size=length) * 0.05 + rng.normal(0.0, 0.005)
    series = np.empty(length)
    value = 0.0
    for i, step in enumerate(steps):
        value = phi * value + step
        series[i] = value
    return np.exp(series) * rng.uniform(1.0, 100.0) if rng.random() < 0.3 else series


def _spikes(rng: np.random.Generator, length: int) -> np.ndarray:
    """Quiet (sometimes seasonal) baseline with rare, mostly positive spikes that sometimes decay over a few steps."""
    baseline = rng.normal(0.0, _noise_scale(rng), size=length)
    if rng.random() < 0.5:
        baseline += rng.uniform(0.2, 1.0) * _seasonal_pattern(rng, length, _period(rng, length))
    heights = rng.exponential(rng.uniform(3.0, 20.0), size=length)
    impulses = np.where(rng.random(length) < rng.uniform(0.005, 0.05), heights, 0.0)
    impulses *= np.where(rng.random(length) < 0.9, 1.0, -1.0)
    if rng.random() < 0.5:
        decay = np.exp(-np.arange(min(length, 32)) / rng.uniform(1.0, 8.0))
        impulses = np.convolve(impulses, decay)[:length]
    return baseline + impulses


#: Generators by name; each maps ``(rng, length)`` to a float64 series of that length.
GENERATORS: dict[str, Generator] = {
    "kernel_synth": _kernel_synth_one,
    "trend": _trend_level_shifts,
    "seasonal": _seasonal_multiplicative,
    "intermittent": _intermittent,
    "random_walk": _random_walk,
    "spikes": _spikes,
}

#: Default shares of ``synthetic_series``: KernelSynth carries most of the signal, the rest adds what GP paths lack.
DEFAULT_MIX: dict[str, float] = {
    "kernel_synth": 0.5,
    "trend": 0.1,
    "seasonal": 0.15,
    "intermittent": 0.1,
    "random_walk": 0.1,
    "spikes": 0.05,
}


# ------------------------------------------------------------------------------------------------ public API --


def _check_seed(seed: SeedLike) -> None:
    entries = [seed] if isinstance(seed, int | np.integer) else list(seed)
    if not entries or any(not isinstance(s, int | np.integer) or isinstance(s, bool) or s < 0 for s in entries):
        raise ValueError(f"seed must be a non-negative int or a non-empty sequence of them, got {seed!r}")


def _check_positive(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _series_rng(seed: SeedLike, index: int) -> np.random.Generator:
    """The random stream of series ``index``: independent of how many series are drawn before or after it."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))


def _stream(one: Callable[[np.random.Generator], np.ndarray], seed: SeedLike, start: int) -> Iterator[np.ndarray]:
    for index in itertools.count(start):
        yield one(_series_rng(seed, index)).astype(np.float32)


def _take(stream: Iterator[np.ndarray], n_series: int, length: int, progress: bool | None, desc: str) -> np.ndarray:
    show = n_series >= _PROGRESS_FROM if progress is None else progress
    out = np.empty((n_series, length), dtype=np.float32)
    for i, series in enumerate(tqdm(itertools.islice(stream, n_series), total=n_series, desc=desc, disable=not show)):
        out[i] = series
    return out


def iter_kernel_synth(length: int, seed: SeedLike, *, start: int = 0) -> Iterator[np.ndarray]:
    """Endless KernelSynth series (float32 ``[length]``), series ``start`` first; the same series as
    ``kernel_synth(n, length, seed=seed)`` in the same order, so training can draw them on the fly."""
    _check_positive("length", length, 2)
    _check_seed(seed)
    return _stream(functools.partial(_kernel_synth_one, length=length), seed, start)


def kernel_synth(n_series: int, length: int = 1024, *, seed: SeedLike, progress: bool | None = None) -> np.ndarray:
    """``n_series`` KernelSynth series as float32 ``[n_series, length]``, deterministic per ``seed``.

    Cost is one Cholesky of a ``length x length`` matrix per series (about 10-20 ms at 1024 on two cores). A tqdm bar
    shows from 1,000 series unless ``progress`` says otherwise.

    Example:
        >>> kernel_synth(2, 256, seed=0).shape
        (2, 256)
    """
    _check_positive("n_series", n_series, 0)
    return _take(iter_kernel_synth(length, seed), n_series, length, progress, "KernelSynth")


def _check_mix(mix: Mapping[str, float] | None) -> tuple[list[str], np.ndarray]:
    mix = DEFAULT_MIX if mix is None else mix
    unknown = set(mix) - set(GENERATORS)
    shares = np.array([float(v) for v in mix.values()])
    if not mix or unknown or not np.all(np.isfinite(shares)) or np.any(shares < 0) or shares.sum() <= 0:
        raise ValueError(
            f"mix must map names from {sorted(GENERATORS)} to non-negative shares with a positive sum, got {dict(mix)}"
        )
    return list(mix), shares / shares.sum()


def _mixed_one(rng: np.random.Generator, length: int, names: list[str], probs: np.ndarray) -> np.ndarray:
    return GENERATORS[names[int(rng.choice(len(names), p=probs))]](rng, length)


def iter_synthetic_series(
    length: int, seed: SeedLike, *, mix: Mapping[str, float] | None = None, start: int = 0
) -> Iterator[np.ndarray]:
    """Endless series (float32 ``[length]``) from the generators in ``mix`` (name -> share; default
    ``DEFAULT_MIX``); the same series as ``synthetic_series`` with the same arguments."""
    _check_positive("length", length, 2)
    _check_seed(seed)
    names, probs = _check_mix(mix)
    return _stream(functools.partial(_mixed_one, length=length, names=names, probs=probs), seed, start)


def synthetic_series(
    n_series: int,
    length: int = 1024,
    *,
    seed: SeedLike,
    mix: Mapping[str, float] | None = None,
    progress: bool | None = None,
) -> np.ndarray:
    """``n_series`` series (float32 ``[n_series, length]``) mixing KernelSynth and the structured generators.

    ``mix`` maps names of ``GENERATORS`` to shares (normalised); e.g. ``{"kernel_synth": 1}`` gives KernelSynth
    only (a different draw than ``kernel_synth``, which skips the choice of generator).
    """
    _check_positive("n_series", n_series, 0)
    return _take(iter_synthetic_series(length, seed, mix=mix), n_series, length, progress, "synthetic")


# ---------------------------------------------------------------------------------------------------- TSMixup --


def _mean_abs_scaled(series: np.ndarray) -> np.ndarray:
    """Divide by the mean absolute value (Chronos' scaling), so that mixed series weigh in by shape, not level."""
    scale = np.nanmean(np.abs(series)) if np.isfinite(series).any() else np.nan
    return series / scale if np.isfinite(scale) and scale > 0 else series


def _window(series: np.ndarray, length: int, rng: np.random.Generator) -> np.ndarray:
    """A random window of ``length`` steps; a shorter series is taken whole and left-padded with NaN."""
    if series.size >= length:
        start = int(rng.integers(0, series.size - length + 1))
        return series[start : start + length]
    return np.concatenate([np.full(length - series.size, np.nan), series])


def _mixup_one(rng: np.random.Generator, pool: list[np.ndarray], max_k: int, length: int, alpha: float) -> np.ndarray:
    k = int(rng.integers(1, max_k + 1))
    picks = rng.choice(len(pool), size=k, replace=k > len(pool))
    windows = np.stack([_mean_abs_scaled(_window(pool[i], length, rng)) for i in picks])
    weights = rng.dirichlet(np.full(k, alpha))
    observed = np.isfinite(windows)
    # Where a component is missing (NaN), renormalise the weights over the observed ones: still convex.
    w = np.where(observed, weights[:, None], 0.0)
    total = w.sum(axis=0)
    mixed = (w * np.where(observed, windows, 0.0)).sum(axis=0)
    return np.where(total > 0, mixed / np.where(total > 0, total, 1.0), np.nan)


def ts_mixup(
    series_list: Sequence[np.ndarray],
    n_out: int,
    *,
    max_k: int = 3,
    length: int = 1024,
    seed: SeedLike,
    alpha: float = 1.5,
    progress: bool | None = None,
) -> np.ndarray:
    """TSMixup (Chronos): ``n_out`` convex mixtures of up to ``max_k`` series, float32 ``[n_out, length]``.

    Per output: ``k ~ U{1..max_k}`` series are drawn, a random window of ``length`` steps is cut from each (a shorter
    series is used whole, left-padded with NaN), each window is divided by its mean absolute value, and the windows
    are averaged with weights ``~ Dirichlet(alpha)``. Where some windows are NaN the weights are renormalised over
    the others; where all are, the output is NaN.
    """
    _check_positive("n_out", n_out, 0)
    _check_positive("max_k", max_k)
    _check_positive("length", length)
    _check_seed(seed)
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    pool = [np.asarray(s, dtype=np.float64) for s in series_list]
    if any(s.ndim != 1 for s in pool):
        raise ValueError("series_list must hold 1-D arrays")
    pool = [s for s in pool if np.isfinite(s).any()]
    if not pool:
        raise ValueError("series_list has no series with an observed (finite) value")
    one = functools.partial(_mixup_one, pool=pool, max_k=max_k, length=length, alpha=alpha)
    return _take(_stream(one, seed, 0), n_out, length, progress, "TSMixup")
