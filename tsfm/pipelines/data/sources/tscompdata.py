"""Forecasting-competition sets from the R package tscompdata (GPL-3): NN3, NNGC1, GEFCom2012 load and temperature.

- NN3: 111 monthly series (the competition's in-sample data), scored on its 18-step horizon.
- NNGC1: 66 transport series, 11 at each of six frequencies (yearly ... hourly); one dataset per frequency. The
  "hourly" group (``F``) records 18 to 20 readings a day (R frequency 18-20 x 365.25); it is written as ``H`` on a plain
  hourly grid, which is honest about the order of values but not about clock times.
- GEFCom2012: 20 load zones and 11 temperature stations, hourly from 2004-01-01 00:00 (39,414 steps); NaN where
  the competition withheld values.
"""

from __future__ import annotations

import os
from collections import defaultdict

from ..paths import raw_file
from .base import SourceDataset, make_entry
from .rdata_io import RSeries, load_rda, r_time_index

__all__ = ["gefcom2012", "nn3", "nngc1"]

_NNGC1_GROUPS = {"A": "yearly", "B": "quarterly", "C": "monthly", "D": "weekly", "E": "daily", "F": "hourly"}
"""NNGC1 names its series ``1.<letter>-<nnn>``; the letter is the frequency group."""


def _collection(file: str, shared: str | os.PathLike[str] | None) -> dict[str, RSeries]:
    (collection,) = load_rda(str(raw_file(file, shared))).values()
    return {str(k): v for k, v in collection.items()}


def nn3(shared: str | os.PathLike[str] | None = None) -> SourceDataset:
    """NN3: 111 monthly series."""
    entries = []
    for name, s in _collection("nn3.rda", shared).items():
        alias, start = r_time_index(s)
        entries.append(make_entry(name, start, alias, s.values))
    return SourceDataset(
        name="nn3",
        freq="M",
        entries=entries,
        files=("raw:nn3.rda",),
        description="NN3 forecasting competition, 111 monthly series (tscompdata).",
        license="GPL-3 (R package tscompdata)",
    )


def nngc1(group: str, shared: str | os.PathLike[str] | None = None) -> SourceDataset:
    """NNGC1 series of one group: ``yearly``, ``quarterly``, ``monthly``, ``weekly``, ``daily`` or ``hourly``."""
    by_group: dict[str, list] = defaultdict(list)
    for name, s in _collection("nngc1.rda", shared).items():
        g = _NNGC1_GROUPS[name.split(".")[1][0]]
        if g != group:
            continue
        if g == "hourly":  # 18-20 readings a day, kept in order on an hourly grid
            day = round((s.start - int(s.start)) * 365.25)
            alias, start = "H", r_time_index(RSeries(s.values, int(s.start) + day / 365, 365))[1]
        else:
            alias, start = r_time_index(s)
        by_group[g].append(make_entry(name, start, alias, s.values))
    entries = by_group[group]
    if not entries:
        raise ValueError(f"nngc1: unknown group {group!r}; expected one of {sorted(_NNGC1_GROUPS.values())}")
    return SourceDataset(
        name=f"nngc1_{group}",
        freq=entries[0]["freq"],
        entries=entries,
        files=("raw:nngc1.rda",),
        description=f"NNGC1 forecasting competition, {group} transport series (tscompdata).",
        license="GPL-3 (R package tscompdata)",
    )


def gefcom2012(kind: str, shared: str | os.PathLike[str] | None = None) -> SourceDataset:
    """GEFCom2012 hourly ``load`` (20 zones) or ``temp`` (11 stations)."""
    if kind not in ("load", "temp"):
        raise ValueError(f"gefcom2012: kind must be 'load' or 'temp', got {kind!r}")
    file = f"gefcom2012_{kind}.rda"
    prefix = "zone" if kind == "load" else "station"
    entries = []
    for name, s in _collection(file, shared).items():
        alias, start = r_time_index(s)
        entries.append(make_entry(f"{prefix}_{name}", start, alias, s.values))
    return SourceDataset(
        name=f"gefcom2012_{kind}/H",
        freq="H",
        entries=entries,
        files=(f"raw:{file}",),
        description=f"GEFCom2012 {'load zones' if kind == 'load' else 'temperature stations'}, hourly (tscompdata).",
        license="GPL-3 (R package tscompdata)",
    )
