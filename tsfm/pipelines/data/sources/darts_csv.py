"""CSV sets as shipped with darts (unit8co/darts): ETTh1/ETTh2, exchange rate, ILINet, NYC taxi passengers.

- ETTh1/ETTh2: 7 transformer-station variates, hourly, one ``[7, T]`` series each (GIFT-Eval's ``ett1/H``,
  ``ett2/H`` layout; our copy differs slightly from GIFT-Eval's, DESIGN §6).
- exchange rate: 8 currencies, 7,588 daily steps from 1990 (LSTNet); the file has no dates, so the start is
  1990-01-01 and the frequency ``D`` (not ``B``: pandas 3 deprecates business-day periods, which gluonts needs).
- ILINet: US weekly influenza-like-illness (CDC), dated Sundays (``W-SUN``); the 7 columns of the usual
  "national illness" set (the age columns with structural gaps are dropped); four missing weeks become NaN.
- NYC taxi: passengers per 30 minutes, univariate.
"""

from __future__ import annotations

import os

import pandas as pd

from ..paths import raw_file
from ..regular import regularise
from .base import SourceDataset, make_entry

__all__ = ["ett", "exchange_rate", "ili", "nyc_taxi"]

ILI_COLUMNS = [
    "% WEIGHTED ILI",
    "%UNWEIGHTED ILI",
    "AGE 0-4",
    "AGE 5-24",
    "ILITOTAL",
    "NUM. OF PROVIDERS",
    "TOTAL PATIENTS",
]


def _dated(file: str, time_col: str, shared: str | os.PathLike[str] | None) -> pd.DataFrame:
    frame = pd.read_csv(raw_file(file, shared))
    return frame.set_index(pd.to_datetime(frame.pop(time_col)))


def ett(which: int, shared: str | os.PathLike[str] | None = None) -> SourceDataset:
    """ETTh1 (``which=1``) or ETTh2 (``which=2``): one hourly series of 7 variates."""
    if which not in (1, 2):
        raise ValueError(f"ett: which must be 1 or 2, got {which}")
    file = f"ETTh{which}.csv"
    start, values = regularise(_dated(file, "date", shared), "H", name=file)
    return SourceDataset(
        name=f"ett{which}/H",
        freq="H",
        entries=[make_entry(f"ETTh{which}", start, "H", values)],
        files=(f"raw:{file}",),
        description=f"ETTh{which}: electricity transformer temperature, 7 variates, hourly (darts copy).",
        license="CC BY-ND 4.0",
    )


def exchange_rate(shared: str | os.PathLike[str] | None = None) -> SourceDataset:
    """8 daily exchange rates as one ``[8, T]`` series from 1990-01-01."""
    frame = pd.read_csv(raw_file("exchange_rate.csv", shared))
    return SourceDataset(
        name="exchange_rate",
        freq="D",
        entries=[make_entry("exchange_rate", pd.Timestamp("1990-01-01"), "D", frame.to_numpy().T)],
        files=("raw:exchange_rate.csv",),
        description="Exchange rates of 8 currencies (LSTNet), 7,588 days from 1990 (darts copy).",
        license="see source (LSTNet / darts)",
    )


def ili(shared: str | os.PathLike[str] | None = None) -> SourceDataset:
    """US ILINet, weekly, 7 variates."""
    frame = _dated("ILINet.csv", "DATE", shared)[ILI_COLUMNS]
    start, values = regularise(frame, "W-SUN", name="ILINet.csv")
    return SourceDataset(
        name="ili",
        freq="W-SUN",
        entries=[make_entry("ILINet", start, "W-SUN", values)],
        files=("raw:ILINet.csv",),
        description="CDC ILINet national influenza-like illness, weekly, 7 variates (darts copy).",
        license="public domain (CDC), see source",
    )


def nyc_taxi(shared: str | os.PathLike[str] | None = None) -> SourceDataset:
    """New York taxi passengers per 30 minutes."""
    frame = _dated("taxi_new_york_passengers.csv", "time", shared)["#Passengers"]
    start, values = regularise(frame, "30T", name="taxi_new_york_passengers.csv")
    return SourceDataset(
        name="nyc_taxi/30T",
        freq="30T",
        entries=[make_entry("nyc_taxi_passengers", start, "30T", values)],
        files=("raw:taxi_new_york_passengers.csv",),
        description="NYC taxi passengers per 30 minutes, 2014-07 to 2015-01 (NAB / darts copy).",
        license="see source (NAB)",
    )
