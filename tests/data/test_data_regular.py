"""Regularising irregular sources: duplicates averaged, gaps NaN, off-grid stamps refused or floored."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tsfm.pipelines.data.regular import OffGridError, regularise


def test_duplicates_averaged_and_gaps_filled() -> None:
    index = pd.to_datetime(["2020-01-01 00:00", "2020-01-01 01:00", "2020-01-01 01:00", "2020-01-01 04:00"])
    start, values = regularise(pd.Series([1.0, 2.0, 4.0, 5.0], index=index), "H")
    assert start == pd.Timestamp("2020-01-01 00:00")
    np.testing.assert_array_equal(values, np.array([1, 3, np.nan, np.nan, 5], np.float32))
    assert values.dtype == np.float32


def test_multivariate_block_and_nan_ignored_in_average() -> None:
    index = pd.to_datetime(["2020-01-01 00:30", "2020-01-01 00:30", "2020-01-01 01:30"])
    frame = pd.DataFrame({"a": [1.0, np.nan, 2.0], "b": [3.0, 5.0, np.nan]}, index=index)
    start, values = regularise(frame, "H")
    assert start == pd.Timestamp("2020-01-01 00:30")  # the grid starts at the first stamp
    np.testing.assert_array_equal(values, np.array([[1, 2], [4, np.nan]], np.float32))


def test_off_grid_refused_unless_floor() -> None:
    index = pd.to_datetime(["2016-10-04 07:59:42", "2016-10-04 08:25:42", "2016-10-04 08:31:00"])
    series = pd.Series([10.0, 20.0, 40.0], index=index)
    with pytest.raises(OffGridError, match="off the 30T grid"):
        regularise(series, "30T")
    start, values = regularise(series, "30T", floor=True)
    assert start == pd.Timestamp("2016-10-04 07:30")
    np.testing.assert_array_equal(values, np.array([10, 20, 40], np.float32))


def test_calendar_frequencies_use_periods() -> None:
    index = pd.to_datetime(["2020-01-15", "2020-01-31", "2020-04-02"])
    start, values = regularise(pd.Series([1.0, 3.0, 7.0], index=index), "M")
    assert start == pd.Timestamp("2020-01-01")
    np.testing.assert_array_equal(values, np.array([2, np.nan, np.nan, 7], np.float32))
    weekly = pd.Series([1.0, 2.0], index=pd.to_datetime(["1997-10-12", "1997-10-26"]))  # Sundays, one week missing
    start, values = regularise(weekly, "W-SUN")
    assert start == pd.Timestamp("1997-10-06")  # the period's start (Monday) of the week ending Sunday 10-12
    np.testing.assert_array_equal(values, np.array([1, np.nan, 2], np.float32))


def test_business_days() -> None:
    index = pd.to_datetime(["2020-01-03", "2020-01-07"])  # Friday, Tuesday: Monday missing, weekend skipped
    start, values = regularise(pd.Series([1.0, 2.0], index=index), "B")
    assert start == pd.Timestamp("2020-01-03")
    np.testing.assert_array_equal(values, np.array([1, np.nan, 2], np.float32))
    with pytest.raises(OffGridError, match="non-business days"):
        regularise(pd.Series([1.0], index=pd.to_datetime(["2020-01-04"])), "B")
