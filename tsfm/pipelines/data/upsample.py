"""Real series moved onto a finer time grid: high-frequency training data with real day-to-day weather.

The benchmark's 5-minute series (a temperature sensor) repeat a 288-step day whose height and level change from one
day to the next the way weather does, and the default model loses to Seasonal Naive 2.5 days ahead on it
(``benchmarks/RESULTS.md``, thirty-eighth session): it forecasts the daily cycle damped and pulled towards the week's
mean, where the last day persists. Its real pretraining corpus has no such series at that resolution (one 5-minute
set of call counts), and the synthetic priors draw day-to-day changes from chosen processes, not measured ones. The
corpus does hold hourly temperatures, loads and traffic over years, whose days change as real days do; interpolated
onto a grid ``factor`` times finer, an hourly series becomes a 5-minute-like one (``factor`` 12) whose 2,048-step
context holds a week, as a real 5-minute context does. The stride augmentation of the batch sampler does the
opposite (coarser grids from fine ones).

Only training series are moved (the validation split stays as it was, so validation losses of runs with and without
upsampling compare), and each frequency's copies form new datasets, named ``"<dataset> x<factor>"``, which the
corpus's dataset-balanced weights then give one dataset's share each.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

from .corpus import Corpus
from .frequency import UnknownFrequencyError, to_pandas_freq

__all__ = ["UpsampleError", "add_upsampled", "check_texture", "parse_upsampling", "upsample", "upsampled_frequency"]


class UpsampleError(ValueError):
    """An upsampling request that cannot be carried out (a frequency without a fixed step, a factor below 2)."""


def upsample(series: np.ndarray, factor: int, texture: float = 0.0,
             rng: np.random.Generator | None = None) -> np.ndarray:
    """``series`` on a grid ``factor`` times finer: ``(len - 1) * factor + 1`` values, ``out[i * factor] ==
    series[i]``; between a missing step and its neighbours the finer steps are missing too.

    The observed steps are joined by straight lines: each observed value kept exactly (a day's peak stays as high as
    it was measured) and no shape the data did not have. But a line's fine steps are far smoother than a real
    5-minute sensor's: within an hour every step is the same, so consecutive steps correlate (median lag-1
    correlation 0.83 over the capped corpus' copies) where the benchmark's 5-minute temperatures move almost
    independently from step to step (0.13; ``benchmarks/results/cpu-2026-12-07-session40``). ``texture > 0`` adds
    to each line a Brownian bridge, zero at both observed steps, whose standard deviation per fine step is
    ``texture * |change over the interval| / sqrt(factor)`` (at 1: as if the series moved as a random walk at its
    observed pace within each interval): a flat interval stays flat (a night of zero solar power), a steep one gets
    texture; the result is clipped to the range the series was observed in. The bridges draw from ``rng``
    (required then, so copies are reproducible). A paired CPU probe found no sign yet that textured copies teach the
    model to read rough input better (``benchmarks/RESULTS.md``, fortieth session); straight lines stay the default.
    """
    _check_factor(factor)
    check_texture(texture)
    values = np.asarray(series, dtype=np.float32)
    if values.ndim != 1 or values.size < 2:
        raise UpsampleError(f"series must be one-dimensional with at least 2 steps, got shape {values.shape}")
    fraction = np.arange(factor, dtype=np.float32) / factor
    left, right = values[:-1, None], values[1:, None]
    inner = left + (right - left) * fraction  # NaN between a missing step and its neighbours
    if texture > 0:
        if rng is None:
            raise UpsampleError("texture draws random bridges: pass rng (a numpy Generator)")
        inner = inner + texture * _bridges(np.nan_to_num(right - left), factor, rng)
        finite = values[np.isfinite(values)]
        if finite.size:
            inner = np.clip(inner, finite.min(), finite.max())
    inner[:, 0] = values[:-1]  # each observed value exactly, whatever its neighbour
    return np.concatenate([inner.reshape(-1), values[-1:]])


def _bridges(change: np.ndarray, factor: int, rng: np.random.Generator) -> np.ndarray:
    """``[n, factor]`` Brownian bridges over ``n`` intervals with changes ``change [n, 1]``: column ``j`` at time
    ``j / factor``, zero at 0 (and at 1, the next interval's column 0), variance per fine step ``change**2 /
    factor``."""
    steps = rng.standard_normal((change.shape[0], factor)) * (np.abs(change) / np.sqrt(factor))
    walk = np.cumsum(steps, axis=1)  # the walk at times 1/factor ... 1
    time = np.arange(1, factor + 1) / factor
    bridge = walk - time * walk[:, -1:]  # pinned to zero at time 1
    return np.concatenate([np.zeros((change.shape[0], 1)), bridge[:, :-1]], axis=1).astype(np.float32)


#: Legacy pandas codes (GIFT-Eval's stored spelling) of the steps a finer grid is written in, coarsest first.
_UNITS: tuple[tuple[str, pd.Timedelta], ...] = (
    ("D", pd.Timedelta(days=1)), ("H", pd.Timedelta(hours=1)), ("T", pd.Timedelta(minutes=1)),
    ("S", pd.Timedelta(seconds=1)),
)


def _check_factor(factor: object) -> None:
    """Refuses anything but an integer of at least 2 (1 would copy the series, a fraction is downsampling)."""
    if isinstance(factor, bool) or not isinstance(factor, int | np.integer) or factor < 2:
        raise UpsampleError(f"factor must be an integer >= 2, got {factor!r}")


def check_texture(texture: float) -> None:
    """Refuses a texture that is not a finite number of at least 0 (0: straight lines)."""
    if not np.isfinite(texture) or texture < 0:
        raise UpsampleError(f"texture must be a finite number >= 0, got {texture!r}")


def _step(freq: str) -> pd.Timedelta:
    """The fixed duration of one step of ``freq``; refuses frequencies without one (weekly, monthly, ...)."""
    problem = f"frequency {freq!r} has no fixed step to divide (e.g. D, H, 30T, 10T)"
    try:
        offset = to_offset(to_pandas_freq(freq))
    except (UnknownFrequencyError, ValueError) as err:
        raise UpsampleError(problem) from err
    if isinstance(offset, pd.offsets.Day):  # a calendar day from pandas 3 on; 24 hours in every dataset here
        return pd.Timedelta(days=offset.n).as_unit("ns")
    if not isinstance(offset, pd.offsets.Tick):  # months, weeks, business days: steps of varying length
        raise UpsampleError(problem)
    return pd.Timedelta(offset).as_unit("ns")  # in nanoseconds: a step in whole seconds would divide as integers


def upsampled_frequency(freq: str, factor: int) -> str:
    """The legacy frequency string of ``freq`` divided by ``factor`` (``"H"``, 12 -> ``"5T"``); refuses a factor
    below 2 and a step that does not divide into whole seconds."""
    _check_factor(factor)
    finer = _step(freq) / factor
    for code, unit in _UNITS:
        if finer >= unit and not finer % unit:
            return f"{finer // unit}{code}" if finer != unit else code
    raise UpsampleError(f"frequency {freq!r} divided by {factor} is not a whole number of seconds "
                        f"({finer.total_seconds():g} s)")


def parse_upsampling(text: str) -> dict[str, int]:
    """``"H=12,30min=6"`` -> ``{"H": 12, "30min": 6}``, each frequency and factor checked."""
    factors: dict[str, int] = {}
    for item in text.split(","):
        freq, _, factor = (part.strip() for part in item.partition("="))
        if not freq or not factor.isdigit():
            raise UpsampleError(f"expected FREQ=FACTOR items separated by commas (e.g. H=12), got {item!r}")
        upsampled_frequency(freq, int(factor))  # checks both
        if any(_step(freq) == _step(seen) for seen in factors):
            raise UpsampleError(f"frequency {freq!r} is given twice")
        factors[freq] = int(factor)
    return factors


def add_upsampled(corpus: Corpus, factors: Mapping[str, int], *, max_length: int | None = None,
                  texture: float = 0.0, seed: int = 0) -> int:
    """Append to ``corpus`` a finer copy of each of its series whose frequency has a factor in ``factors``; returns
    how many were added.

    Frequencies match by their step (``"H"`` and ``"60min"`` are one). Each copy keeps at most the last
    ``max_length`` steps (``None``: all). Series of unknown frequency are left alone. ``texture``: see
    ``upsample``; its bridges draw from one generator seeded by ``seed``, series by series, so a corpus and seed
    give the same copies.
    """
    check_texture(texture)
    # per step: the factor and the finer grid's frequency (checks every pair before any series is touched)
    targets = {_step(freq): (factor, upsampled_frequency(freq, factor)) for freq, factor in factors.items()}
    target_of = {freq: _target(freq, targets) for freq in set(corpus.frequencies)}  # each spelling parsed once
    rng = np.random.default_rng(seed)
    added = 0
    for index in range(len(corpus)):  # the copies appended below are past this range
        target = target_of[corpus.frequencies[index]]
        if target is None or corpus.series[index].size < 2:
            continue
        factor, finer = target
        values = upsample(corpus.series[index], factor, texture, rng)
        if max_length is not None:
            values = values[-max_length:]
        if np.isfinite(values).sum() < 2:
            continue
        corpus.append(np.ascontiguousarray(values), f"{corpus.datasets[index]} x{factor}", freq=finer)
        added += 1
    return added


def _target(freq: str, targets: Mapping[pd.Timedelta, tuple[int, str]]) -> tuple[int, str] | None:
    """``(factor, finer frequency)`` for series of ``freq``; None for a frequency not asked for, unknown (``""``) or
    without a fixed step (monthly, ...): such series are never upsampled."""
    try:
        return targets.get(_step(freq))
    except UpsampleError:
        return None
