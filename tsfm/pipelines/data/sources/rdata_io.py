"""Read R ``.rda`` files (Mcomp, tscompdata) with the pure-Python ``rdata`` package, keeping R's time attributes.

``rdata`` turns an R ``ts`` into a pandas Series indexed by fractions of a year, which is slow for 40k-point hourly
series and loses the frequency. We register our own constructor for ``ts``/``msts`` that keeps the values and
``tsp = (start, end, frequency)``, and turn ``tsp`` into a pandas alias and a first timestamp here, once.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["RSeries", "load_rda", "r_time_index"]


@dataclass(frozen=True)
class RSeries:
    """An R ``ts``: values and R's ``tsp`` attribute (``start`` in units of cycles, ``frequency`` per cycle)."""

    values: np.ndarray
    start: float
    frequency: float


def _ts(obj: Any, attrs: dict[str, Any]) -> RSeries:
    start, _end, frequency = (float(x) for x in attrs["tsp"])
    values = np.asarray(obj, dtype=np.float64)
    # R's NA is a NaN with a payload; NumPy warns when casting it, so replace it with a plain NaN.
    values = np.where(np.isnan(values), np.nan, values)
    return RSeries(values, start, frequency)


@lru_cache(maxsize=8)
def load_rda(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The objects of an ``.rda`` file; every ``ts``/``msts`` becomes an :class:`RSeries`. Cached per path."""
    import rdata

    constructors = dict(rdata.conversion.DEFAULT_CLASS_MAP)
    constructors["ts"] = _ts
    constructors["msts"] = _ts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Missing constructor for R class Mcomp/Mdata"
        parsed = rdata.parser.parse_file(path)
        return rdata.conversion.convert(parsed, constructors)


# R frequency -> (pandas legacy alias, steps per cycle counted from 1 January of the start year)
_R_FREQUENCIES = {
    1: "A-DEC",
    4: "Q-DEC",
    12: "M",
    52: "W-SUN",
    365: "D",
    8766: "H",  # 365.25 x 24: hourly msts (GEFCom)
}


def r_time_index(series: RSeries, *, dummy_year: int | None = None) -> tuple[str, pd.Timestamp]:
    """The pandas alias and first timestamp of an R series.

    R counts time in cycles (years) plus a position inside the cycle: ``1990 + 3/12`` is April 1990 for monthly
    data; weekly data (52) counts weeks from 1 January, daily (365) days, hourly msts (8766 = 365.25 x 24) hours.
    ``dummy_year`` replaces a start year that is not a calendar year (M3 "other" starts at 1).

    Raises:
        ValueError: an R frequency we do not map (the caller decides what to do with such series).
    """
    freq = round(series.frequency)
    if freq not in _R_FREQUENCIES:
        raise ValueError(f"R frequency {series.frequency} has no pandas equivalent here")
    year = math.floor(series.start + 1e-9)
    step = round((series.start - year) * series.frequency)
    if dummy_year is not None:
        year = dummy_year
    base = pd.Timestamp(year=year, month=1, day=1)
    alias = _R_FREQUENCIES[freq]
    if freq == 1:
        start = base
    elif freq in (4, 12):
        start = base + pd.DateOffset(months=step * (12 // freq))
    elif freq == 52:
        start = pd.Period(base + pd.Timedelta(weeks=step), freq="W-SUN").start_time
    elif freq == 365:
        start = base + pd.Timedelta(days=step)
    else:
        start = base + pd.Timedelta(hours=step)
    return alias, pd.Timestamp(start)
