"""Legacy pandas aliases keep working under pandas 3 (pipelines/data/frequency.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from tsfm.pipelines.data.frequency import (
    UnknownFrequencyError,
    freq_key,
    normalise_freq,
    seasonality,
    step_duration,
    to_pandas_freq,
    to_period_freq,
)

LEGACY = [
    "H",
    "15T",
    "10S",
    "5T",
    "T",
    "S",
    "D",
    "B",
    "W",
    "W-SUN",
    "W-WED",
    "M",
    "MS",
    "Q",
    "Q-DEC",
    "QS",
    "A",
    "A-DEC",
    "AS",
    "Y",
    "h",
    "min",
    "ME",
    "QE-DEC",
    "YE-DEC",
    "30min",
    "10s",
]


@pytest.mark.parametrize("alias", LEGACY)
def test_translated_alias_is_accepted_by_running_pandas(alias: str) -> None:
    index = pd.date_range("2020-01-01", periods=3, freq=to_pandas_freq(alias))
    assert len(index) == 3
    period = pd.Period("2020-01-15", freq=to_period_freq(alias)) if alias != "B" else None
    assert period is None or period.freqstr


@pytest.mark.parametrize(
    ("alias", "base"),
    [
        ("15T", "T"),
        ("W-SUN", "W"),
        ("A-DEC", "A"),
        ("QS", "Q"),
        ("MS", "M"),
        ("H", "H"),
        ("h", "H"),
        ("min", "T"),
        ("10S", "S"),
        ("YE-DEC", "A"),
        ("ME", "M"),
        ("Q-DEC", "Q"),
        ("D", "D"),
        ("B", "D"),
        ("5min", "T"),
    ],
)
def test_normalise_freq(alias: str, base: str) -> None:
    assert normalise_freq(alias) == base


def test_same_instants_as_legacy_meaning() -> None:
    assert list(pd.date_range("2020-01-01", periods=2, freq=to_pandas_freq("15T"))) == [
        pd.Timestamp("2020-01-01 00:00"),
        pd.Timestamp("2020-01-01 00:15"),
    ]
    assert pd.date_range("2020-01-01", periods=1, freq=to_pandas_freq("M"))[0] == pd.Timestamp("2020-01-31")
    assert pd.date_range("2020-01-01", periods=1, freq=to_pandas_freq("A-DEC"))[0] == pd.Timestamp("2020-12-31")
    assert to_period_freq("M") == "M" and to_period_freq("MS") == "M"


@pytest.mark.parametrize("bad", ["X", "15Q7", "", "H-XYZ", "W-FOO", 5, "-3H"])
def test_unknown_frequency_is_a_clear_error(bad: object) -> None:
    with pytest.raises(UnknownFrequencyError):
        to_pandas_freq(bad)  # type: ignore[arg-type]
    with pytest.raises(UnknownFrequencyError):
        normalise_freq(bad)  # type: ignore[arg-type]


def test_freq_key_drops_the_anchor_only() -> None:
    assert [freq_key(f) for f in ("A-DEC", "W-SUN", "15T", "H", "10S")] == ["A", "W", "15T", "H", "10S"]


def test_step_duration_orders_the_benchmark_frequencies() -> None:
    keys = ["A", "M", "5T", "W", "Q", "H", "D", "30T"]
    assert sorted(keys, key=step_duration) == ["5T", "30T", "H", "D", "W", "M", "Q", "A"]
    assert step_duration("W-SUN") == pd.Timedelta(days=7) and step_duration("15T") == pd.Timedelta(minutes=15)
    assert step_duration("A-DEC") == pd.Timedelta(days=365)  # the whole year 2001, not the rest of 2000
    with pytest.raises(UnknownFrequencyError):
        step_duration("W-FOO")


def test_seasonality_matches_gluonts_under_legacy_aliases() -> None:
    pytest.importorskip("gluonts")
    assert [seasonality(f) for f in ("H", "15T", "10S", "D", "W-SUN", "M", "Q-DEC", "A-DEC", "5T")] == [
        24,
        96,
        360,
        1,
        1,
        12,
        4,
        1,
        288,
    ]
