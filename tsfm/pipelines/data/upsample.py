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

__all__ = ["METHODS", "UpsampleError", "add_upsampled", "parse_upsampling", "upsample", "upsampled_frequency"]

#: How the finer steps between two observed ones are filled: ``linear`` (a straight line) or ``pchip`` (SciPy's
#: piecewise cubic Hermite interpolation, smooth and monotone between neighbours, so no value overshoots them).
METHODS = ("linear", "pchip")


class UpsampleError(ValueError):
    """An upsampling request that cannot be carried out (a frequency without a fixed step, a factor below 2)."""


def upsample(series: np.ndarray, factor: int, method: str = "linear") -> np.ndarray:
    """``series`` on a grid ``factor`` times finer: ``(len - 1) * factor + 1`` values, ``out[i * factor] ==
    series[i]``.

    Both methods keep each observed value (a day's peak stays as high as it was measured) and add no extremum the data
    did not have. ``linear`` joins the steps by straight lines, which leaves a kink at every observed step;
    ``pchip`` joins them by a curve with a continuous slope, closer to a physical quantity sampled finely (a
    temperature does not turn corners on the hour). Between a missing step and its neighbours the finer steps are
    missing too.
    """
    _check_factor(factor)
    if method not in METHODS:
        raise UpsampleError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    values = np.asarray(series, dtype=np.float32)
    if values.ndim != 1 or values.size < 2:
        raise UpsampleError(f"series must be one-dimensional with at least 2 steps, got shape {values.shape}")
    if method == "pchip":
        return _pchip(values, factor)
    fraction = np.arange(factor, dtype=np.float32) / factor
    left, right = values[:-1, None], values[1:, None]
    inner = left + (right - left) * fraction  # NaN between a missing step and its neighbours
    inner[:, 0] = values[:-1]  # each observed value exactly, whatever its neighbour
    return np.concatenate([inner.reshape(-1), values[-1:]])


def _pchip(values: np.ndarray, factor: int) -> np.ndarray:
    """Monotone cubic interpolation over each run of observed steps (a missing step ends a run, as in ``linear``)."""
    from scipy.interpolate import PchipInterpolator

    out = np.full((values.size - 1) * factor + 1, np.nan, dtype=np.float32)
    observed = np.concatenate([[0], np.isfinite(values).astype(np.int8), [0]])
    for start, stop in np.flatnonzero(np.diff(observed)).reshape(-1, 2):  # [start, stop) of each run
        if stop - start > 1:
            fine = np.arange(start * factor, (stop - 1) * factor + 1)
            curve = PchipInterpolator(np.arange(start, stop), values[start:stop].astype(np.float64))
            out[fine] = curve(fine / factor)
    out[::factor] = values  # each observed value exactly (and a lone observed step, which no curve passes)
    return out


#: Legacy pandas codes (GIFT-Eval's stored spelling) of the steps a finer grid is written in, coarsest first.
_UNITS: tuple[tuple[str, pd.Timedelta], ...] = (
    ("D", pd.Timedelta(days=1)), ("H", pd.Timedelta(hours=1)), ("T", pd.Timedelta(minutes=1)),
    ("S", pd.Timedelta(seconds=1)),
)


def _check_factor(factor: object) -> None:
    """Refuses anything but an integer of at least 2 (1 would copy the series, a fraction is downsampling)."""
    if isinstance(factor, bool) or not isinstance(factor, int | np.integer) or factor < 2:
        raise UpsampleError(f"factor must be an integer >= 2, got {factor!r}")


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
                  method: str = "linear") -> int:
    """Append to ``corpus`` a finer copy of each of its series whose frequency has a factor in ``factors``; returns
    how many were added.

    Frequencies match by their step (``"H"`` and ``"60min"`` are one). Each copy keeps at most the last
    ``max_length`` steps (``None``: all). Series of unknown frequency are left alone. ``method``: see ``upsample``.
    """
    if method not in METHODS:
        raise UpsampleError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    # per step: the factor and the finer grid's frequency (checks every pair before any series is touched)
    targets = {_step(freq): (factor, upsampled_frequency(freq, factor)) for freq, factor in factors.items()}
    added = 0
    for index in range(len(corpus)):  # the copies appended below are past this range
        try:
            target = targets.get(_step(corpus.frequencies[index]))
        except UpsampleError:
            continue  # unknown ("") or without a fixed step (monthly, ...): never upsampled
        if target is None or corpus.series[index].size < 2:
            continue
        factor, finer = target
        values = upsample(corpus.series[index], factor, method)
        if max_length is not None:
            values = values[-max_length:]
        if np.isfinite(values).sum() < 2:
            continue
        corpus.append(np.ascontiguousarray(values), f"{corpus.datasets[index]} x{factor}", freq=finer)
        added += 1
    return added
