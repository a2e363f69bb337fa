"""M3 and M1 competition data (R package Mcomp, GPL-3): series = in-sample ``x`` followed by the test ``xx``.

One dataset per period class: M3 yearly 645, quarterly 756, monthly 1,428, other 174; M1 yearly 181, quarterly 203,
monthly 617. M3 "other" series have no calendar (R frequency 1, time 1, 2, ...): we keep R's frequency (written as
yearly ``A-DEC``) and give them M4's dummy start year 1750; their competition horizon (8) comes from the override in
:mod:`..gift_eval`, not from the frequency. Series of another period whose start is not a calendar year (29 M3
monthly series, N2801-N2829, start in year 1) get the same dummy year, keeping their month: a start before pandas'
nanosecond range (1677) crashes GIFT-Eval's own loading code (``OutOfBoundsDatetime``).
"""

from __future__ import annotations

import os

import numpy as np

from ..paths import raw_file
from .base import SourceDataset, make_entry
from .rdata_io import RSeries, load_rda, r_time_index

__all__ = ["m1", "m3"]

DUMMY_YEAR = 1750
#: Starts before this year are positions, not calendar years (M3 monthly N2801-N2829 start at year 1).
FIRST_CALENDAR_YEAR = 1700
_PERIODS = {"YEARLY": "yearly", "QUARTERLY": "quarterly", "MONTHLY": "monthly", "OTHER": "other"}


def _str(value: object) -> str:
    return str(np.asarray(value).reshape(-1)[0])


def _mcomp(file: str, prefix: str, period: str, shared: str | os.PathLike[str] | None) -> SourceDataset:
    path = raw_file(file, shared)
    (collection,) = load_rda(str(path)).values()
    entries, freq = [], None
    for name, record in collection.items():
        if _PERIODS.get(_str(record["period"])) != period:
            continue
        x: RSeries = record["x"]
        xx: RSeries = record["xx"]
        no_calendar = period == "other" or x.start < FIRST_CALENDAR_YEAR
        alias, start = r_time_index(x, dummy_year=DUMMY_YEAR if no_calendar else None)
        freq = freq or alias
        if alias != freq:
            raise ValueError(f"{file}: series {name} has frequency {alias}, others {freq}")
        entries.append(make_entry(str(name), start, alias, np.concatenate([x.values, xx.values]), trim=False))
    if not entries:
        raise ValueError(f"{file}: no {period} series")
    return SourceDataset(
        name=f"{prefix}_{period}",
        freq=freq,
        entries=entries,
        files=(f"raw:{file}",),
        description=f"{prefix.upper()} competition, {period} series (in-sample + test), from the R package Mcomp.",
        license="GPL-3 (R package Mcomp)",
    )


def m3(period: str, shared: str | os.PathLike[str] | None = None) -> SourceDataset:
    """M3 ``period`` in ``yearly``, ``quarterly``, ``monthly``, ``other``."""
    return _mcomp("M3.rda", "m3", period, shared)


def m1(period: str, shared: str | os.PathLike[str] | None = None) -> SourceDataset:
    """M1 ``period`` in ``yearly``, ``quarterly``, ``monthly``."""
    return _mcomp("M1.rda", "m1", period, shared)
