"""DataFrame validation and frequency handling (tsfm/df_utils.py): every bad input raises ForecastInputError whose
message names the column or series at fault; frequencies are inferred per series and must agree."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.tseries.frequencies import to_offset

from tsfm import df_utils
from tsfm.df_utils import (
    ForecastInputError,
    ForecastInputTypeError,
    check_positive_int,
    check_prediction_length,
    check_quantile_levels,
    future_timestamps,
    infer_freq,
    parse_freq,
    prepare_df,
)


def long_frame(series: dict[str, pd.DatetimeIndex], *, start_value: float = 0.0) -> pd.DataFrame:
    """One row per (item_id, timestamp), target counting up from ``start_value``."""
    frames = [
        pd.DataFrame({"item_id": item_id, "timestamp": stamps, "target": start_value + np.arange(len(stamps))})
        for item_id, stamps in series.items()
    ]
    return pd.concat(frames, ignore_index=True)


@pytest.fixture
def hourly() -> pd.DataFrame:
    return long_frame({
        "A": pd.date_range("2024-01-01", periods=10, freq="h"),
        "B": pd.date_range("2024-02-01", periods=6, freq="h"),
    })


# ---------------------------------------------------------------------------------------------------------------
# Bad inputs: each raises ForecastInputError and names the problem


def assert_input_error(match: str, func, *args, **kwargs) -> ForecastInputError:
    with pytest.raises(ForecastInputError, match=match) as info:
        func(*args, **kwargs)
    return info.value


def test_not_a_dataframe_is_a_type_error():
    err = assert_input_error("must be a pandas DataFrame, got dict", prepare_df, {"target": [1, 2, 3]})
    assert isinstance(err, TypeError) and isinstance(err, ValueError)


def test_empty_frame(hourly):
    assert_input_error("df is empty", prepare_df, hourly.iloc[:0])


@pytest.mark.parametrize(
    ("rename", "named"),
    [({"item_id": "id"}, "id_column='item_id'"), ({"timestamp": "ts"}, "timestamp_column='timestamp'"),
     ({"target": "y"}, "target='target'")],
)
def test_missing_columns_are_named(hourly, rename, named):
    err = assert_input_error("has no column", prepare_df, hourly.rename(columns=rename))
    assert named in str(err)
    assert "unique_id" in str(err)  # and the message says how to pass other names


def test_columns_held_in_the_index_say_reset_index(hourly):
    err = assert_input_error("has no column", prepare_df, hourly.set_index(["item_id", "timestamp"]))
    assert "'item_id', 'timestamp' are index levels; call df.reset_index() first" in str(err)


def test_non_numeric_target(hourly):
    frame = hourly.assign(target=hourly["target"].astype(str))
    err = assert_input_error("target column 'target' must be numeric", prepare_df, frame)
    assert isinstance(err, TypeError)


def test_all_nan_series_is_named(hourly):
    frame = hourly.copy()
    frame.loc[frame["item_id"] == "B", "target"] = np.nan
    assert_input_error("series 'B' has no observed values", prepare_df, frame)


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_infinite_values_name_the_series(hourly, bad):
    frame = hourly.copy()
    frame.loc[12, "target"] = bad
    assert_input_error("infinite values in series 'B'", prepare_df, frame)


def test_unparseable_timestamps(hourly):
    frame = hourly.astype({"timestamp": object})
    frame.loc[3, "timestamp"] = "not a date"
    assert_input_error("timestamp column 'timestamp' could not be parsed", prepare_df, frame)


def test_numeric_timestamps_are_refused(hourly):
    frame = hourly.assign(timestamp=np.arange(len(hourly)))
    assert_input_error("timestamp column 'timestamp' holds numbers", prepare_df, frame)


def test_missing_timestamp_names_the_series(hourly):
    frame = hourly.copy()
    frame.loc[11, "timestamp"] = pd.NaT
    assert_input_error("timestamp column 'timestamp' has missing values \\(series 'B'", prepare_df, frame)


def test_missing_ids(hourly):
    frame = hourly.astype({"item_id": object})
    frame.loc[0, "item_id"] = None
    assert_input_error("id column 'item_id' has missing values", prepare_df, frame)


def test_duplicate_id_timestamp_pairs(hourly):
    frame = pd.concat([hourly, hourly.iloc[[12]]], ignore_index=True)
    assert_input_error("series 'B' has duplicate timestamps", prepare_df, frame)


def test_irregular_series_without_freq(hourly):
    frame = hourly.drop(index=[3, 4])
    err = assert_input_error("series 'A' has irregular timestamps", prepare_df, frame)
    assert "freq=" in str(err)


def test_unknown_freq_string(hourly):
    assert_input_error("unknown freq 'fortnightly'", prepare_df, hourly, freq="fortnightly")
    with pytest.raises(ForecastInputTypeError, match="freq must be a pandas frequency string"):
        prepare_df(hourly, freq=3)


def test_off_grid_stamps_with_freq(hourly):
    frame = hourly.copy()
    frame.loc[2, "timestamp"] = frame.loc[2, "timestamp"] + pd.Timedelta(minutes=30)
    assert_input_error("series 'A' has timestamp .* not on the 'h' grid", prepare_df, frame, freq="h")
    assert_input_error("not on the 'D' grid", prepare_df, hourly, freq="D")


def test_too_short_to_infer():
    frame = long_frame({"A": pd.date_range("2024-01-01", periods=2, freq="D")})
    assert_input_error("fewer than 3 timestamps; pass freq=", prepare_df, frame)
    assert prepare_df(frame, freq="D").freq == to_offset("D")


def test_duplicate_column_names(hourly):
    frame = pd.concat([hourly, hourly[["target"]]], axis=1)
    assert_input_error("more than one column named 'target'", prepare_df, frame)


@pytest.mark.parametrize("value", [0, -3])
def test_prediction_length_must_be_positive(value):
    assert_input_error("prediction_length must be a positive integer", check_prediction_length, value)


@pytest.mark.parametrize("value", [2.0, "24", True, None])
def test_prediction_length_must_be_an_int(value):
    with pytest.raises(ForecastInputTypeError, match="prediction_length must be a positive integer"):
        check_prediction_length(value)


def test_prediction_length_accepts_numpy_ints():
    assert check_prediction_length(np.int64(12)) == 12


@pytest.mark.parametrize(
    ("levels", "match"),
    [([], "quantile_levels is empty"), ([0.1, 1.0], "strictly between 0 and 1"), ([0.0], "strictly between"),
     ([-0.1], "strictly between"), ([0.5, 0.5], "repeated levels: \\[0.5\\]"), ("0.5", "sequence of numbers"),
     ([0.1, "a"], "must contain numbers")],
)
def test_bad_quantile_levels(levels, match):
    assert_input_error(match, check_quantile_levels, levels)


def test_quantile_levels_keep_the_callers_order():
    assert check_quantile_levels([0.9, np.float64(0.1), 0.5]) == (0.9, 0.1, 0.5)


@pytest.mark.parametrize(("name", "value"), [("batch_size", 0), ("batch_size", 1.5), ("context_length", -1)])
def test_bad_batch_size_and_context_length(name, value):
    assert_input_error(f"{name} must be a positive integer", check_positive_int, name, value)


def test_context_length_may_be_none():
    assert check_positive_int("context_length", None, allow_none=True) is None


# ---------------------------------------------------------------------------------------------------------------
# Frequency inference


@pytest.mark.parametrize("alias", ["h", "D", "W-SUN", "MS", "15min", "ME", "QS-JAN", "30s"])
def test_infer_freq(alias):
    stamps = pd.date_range("2023-01-01", periods=12, freq=alias)
    assert infer_freq(stamps) == to_offset(alias)
    frame = long_frame({"x": stamps, "y": stamps[3:]})
    prepared = prepare_df(frame)
    assert prepared.freq == to_offset(alias)
    expected_next = stamps[-1] + to_offset(alias)
    assert prepared.future_timestamps(2)[0] == expected_next


def test_series_that_disagree_are_named():
    frame = long_frame({
        "hourly": pd.date_range("2024-01-01", periods=8, freq="h"),
        "daily": pd.date_range("2024-01-01", periods=8, freq="D"),
    })
    err = assert_input_error("series disagree on the frequency", prepare_df, frame)
    assert "'hourly' is 'h'" in str(err) and "'daily' is 'D'" in str(err)


def test_short_series_take_the_common_frequency():
    frame = long_frame({
        "long": pd.date_range("2024-01-01", periods=8, freq="D"),
        "short": pd.date_range("2024-03-01", periods=2, freq="D"),
    })
    prepared = prepare_df(frame)
    assert prepared.freq == to_offset("D")
    assert [len(t) for t in prepared.targets] == [8, 2]


def test_short_series_with_a_gap_is_refused_without_freq():
    frame = long_frame({
        "long": pd.date_range("2024-01-01", periods=8, freq="D"),
        "short": pd.DatetimeIndex(["2024-03-01", "2024-03-04"]),
    })
    assert_input_error("series 'short' has 2 missing timestamp", prepare_df, frame)


def test_infer_freq_needs_three_regular_stamps():
    assert infer_freq(pd.DatetimeIndex(["2024-01-01", "2024-01-02"])) is None
    assert infer_freq(pd.DatetimeIndex(["2024-01-01", "2024-01-02", "2024-01-05"])) is None


def test_parse_freq_accepts_offsets():
    assert parse_freq(to_offset("2h")) == to_offset("2h")


def test_parse_freq_reads_each_alias_once(monkeypatch):
    """A request of 1,000 series names its frequency 1,000 times; pandas reads the alias once (each read costs
    ~50 us with its warning filter: the service's calendar attack spent 0.1 s of GIL per request there)."""
    reads: list[str] = []

    def counting_to_offset(alias):
        reads.append(alias)
        return to_offset(alias)

    monkeypatch.setattr(df_utils, "to_offset", counting_to_offset)
    df_utils._offset_of_alias.cache_clear()
    offsets = [parse_freq(alias) for alias in ["bh", "15min"] * 500]
    assert reads == ["bh", "15min"]
    assert offsets[0] == to_offset("bh") and offsets[1] == to_offset("15min")
    for _ in range(2):  # an unknown alias is not cached: every call raises the same clear error
        assert_input_error("unknown freq 'nonsense'", parse_freq, "nonsense")
    df_utils._offset_of_alias.cache_clear()


# ---------------------------------------------------------------------------------------------------------------
# Sorting, order of series, regularisation


def test_unsorted_rows_are_sorted_by_time_and_series_keep_first_appearance_order(hourly):
    shuffled = hourly.sample(frac=1.0, random_state=0).reset_index(drop=True)
    first_id = shuffled["item_id"].iloc[0]
    prepared = prepare_df(shuffled)
    assert prepared.item_ids[0] == first_id
    by_id = dict(zip(prepared.item_ids, prepared.targets, strict=True))
    np.testing.assert_array_equal(by_id["A"], np.arange(10.0))
    np.testing.assert_array_equal(by_id["B"], np.arange(6.0))


def test_freq_fills_missing_stamps_with_nan(hourly):
    prepared = prepare_df(hourly.drop(index=[3, 4]), freq="h")
    np.testing.assert_array_equal(prepared.targets[0], [0, 1, 2, np.nan, np.nan, 5, 6, 7, 8, 9])
    assert prepared.last_timestamps[0] == pd.Timestamp("2024-01-01 09:00")


def test_freq_finer_than_the_data_warns_and_still_fills():
    """Daily rows passed freq="h": 23 of every 24 grid steps would be NaN, which is almost always a wrong freq."""
    frame = long_frame({"A": pd.date_range("2024-01-01", periods=5, freq="D")})
    with pytest.warns(UserWarning, match=r"freq='h' left 92 of 97 steps \(95%\).*series 'A'; its rows are most "
                                         r"often 1 days 00:00:00 apart"):
        prepared = prepare_df(frame, freq="h")
    assert len(prepared.targets[0]) == 97 and np.isfinite(prepared.targets[0]).sum() == 5


def test_freq_with_a_few_gaps_does_not_warn(hourly, recwarn):
    prepare_df(hourly.drop(index=[3, 4]), freq="h")
    assert not [w for w in recwarn if "coarser" in str(w.message)]


def test_nan_targets_are_kept(hourly):
    frame = hourly.copy()
    frame.loc[[0, 5], "target"] = np.nan
    prepared = prepare_df(frame)
    assert np.isnan(prepared.targets[0][[0, 5]]).all()


def test_nullable_integer_target():
    frame = long_frame({"A": pd.date_range("2024-01-01", periods=5, freq="D")})
    frame["target"] = pd.array([1, None, 3, 4, 5], dtype="Int64")
    prepared = prepare_df(frame)
    np.testing.assert_array_equal(prepared.targets[0], [1, np.nan, 3, 4, 5])


def test_iso_strings_of_mixed_precision_parse():
    frame = pd.DataFrame({
        "item_id": "A",
        "timestamp": ["2024-01-01", "2024-01-01 06:00:00", "2024-01-01 12:00", "2024-01-01 18:00:00"],
        "target": [1.0, 2.0, 3.0, 4.0],
    })
    assert prepare_df(frame).freq == to_offset("6h")


def test_timezone_is_kept():
    stamps = pd.date_range("2024-03-30", periods=48, freq="h", tz="Europe/Berlin")  # crosses a DST change
    prepared = prepare_df(long_frame({"A": stamps}))
    future = prepared.future_timestamps(3)
    assert str(future.tz) == "Europe/Berlin"
    assert future[0] == stamps[-1] + pd.Timedelta(hours=1)


def test_future_timestamps_are_series_major():
    last = pd.DatetimeIndex(["2024-01-31", "2024-03-31"])
    future = future_timestamps(last, to_offset("ME"), 2)
    assert list(future.strftime("%Y-%m-%d")) == ["2024-02-29", "2024-03-31", "2024-04-30", "2024-05-31"]


def test_unvalidated_fast_path(hourly):
    prepared = prepare_df(hourly, validate_inputs=False)
    assert prepared.freq == to_offset("h")
    assert list(prepared.item_ids) == ["A", "B"]
    assert [len(t) for t in prepared.targets] == [10, 6]
