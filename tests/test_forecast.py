"""The forecasting API (tsfm/forecast.py): shapes, ids, timestamps, quantile columns, batching, warnings.

Most tests run against ``FakeForecaster``, which has the Forecaster interface and a forecast you can predict by
hand (every quantile is the last observed value plus an offset). The real model is exercised twice: a tiny
randomly initialised Forecaster saved and loaded through ``tsfm.checkpoint`` (always), and the shipped default
model on real data (skipped until it is shipped).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from pandas.tseries.frequencies import to_offset

from tsfm.config import DEFAULT_QUANTILE_LEVELS, ModelConfig
from tsfm.df_utils import ForecastInputError
from tsfm.forecast import interpolate_quantiles, predict, predict_df

RAW_DATA = Path(__file__).resolve().parents[2] / "shared/data/raw"
M4_HOURLY = RAW_DATA / "m4_hourly_train.csv"

SPREAD = 10.0  # the fake's quantile at level q is last + (q - 0.5) * SPREAD


class FakeForecaster(torch.nn.Module):
    """The Forecaster interface with a hand-checkable forecast: every step repeats the last observed value.

    Patch size 4, context length 64, trained horizon 3 patches = 12 steps. ``calls`` records each context shape
    so tests can check batching and truncation.
    """

    def __init__(self, patch_size: int = 4, context_length: int = 64, train_horizon_patches: int = 3) -> None:
        super().__init__()
        self.config = ModelConfig(
            patch_size=patch_size, context_length=context_length, train_horizon_patches=train_horizon_patches
        )
        self.weight = torch.nn.Parameter(torch.zeros(1))  # gives the model a device
        self.calls: list[tuple[int, int]] = []
        self.contexts: list[torch.Tensor] = []

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        return self.config.quantile_levels

    def forecast(self, context: torch.Tensor, prediction_length: int) -> torch.Tensor:
        assert context.dtype == torch.float32 and context.dim() == 2
        self.calls.append(tuple(context.shape))
        self.contexts.append(context.clone())
        observed = ~torch.isnan(context)
        positions = torch.arange(context.shape[1]).expand_as(context)
        last_index = torch.where(observed, positions, -1).max(dim=1).values
        last = context[torch.arange(context.shape[0]), last_index]
        offsets = (torch.tensor(self.quantile_levels) - 0.5) * SPREAD
        return (last[:, None, None] + offsets[None, :, None]).expand(-1, -1, prediction_length).clone()


@pytest.fixture
def fake() -> FakeForecaster:
    return FakeForecaster()


def hourly_frame(ids=("A", "B"), lengths=(20, 15), *, id_column="item_id", timestamp_column="timestamp",
                 target="target") -> pd.DataFrame:
    rows = []
    for k, (item_id, n) in enumerate(zip(ids, lengths, strict=True)):
        rows.append(pd.DataFrame({
            id_column: item_id,
            timestamp_column: pd.date_range(f"2024-01-0{k + 1}", periods=n, freq="h"),
            target: 100.0 * (k + 1) + np.arange(n),
        }))
    return pd.concat(rows, ignore_index=True)


# ---------------------------------------------------------------------------------------------------------------
# predict(): arrays


@pytest.mark.parametrize(
    ("context", "n"),
    [(np.arange(10.0), 1), ([1.0, 2.0, 3.0], 1), (torch.arange(10.0), 1), (np.ones((3, 8)), 3),
     (torch.ones(3, 8), 3), ([np.arange(5.0), torch.arange(9.0), [1.0, 2.0]], 3),
     (pd.Series([1.0, None, 3.0]), 1), ([pd.Series([1.0, 2.0]), np.ones(3)], 2)],
)
def test_predict_shapes(fake, context, n):
    quantiles, median = predict(context, 6, model=fake)
    assert quantiles.shape == (n, 6, len(DEFAULT_QUANTILE_LEVELS)) and median.shape == (n, 6)
    assert quantiles.dtype == np.float32 and median.dtype == np.float32


def test_predict_uses_last_observed_value_with_nan_and_ragged_lengths(fake):
    context = [np.array([1.0, 2.0, np.nan]), np.arange(11.0), np.array([np.nan, 7.0])]
    quantiles, median = predict(context, 3, model=fake)
    np.testing.assert_allclose(median, [[2.0] * 3, [10.0] * 3, [7.0] * 3])
    np.testing.assert_allclose(quantiles[1, 0], 10.0 + (np.array(DEFAULT_QUANTILE_LEVELS) - 0.5) * SPREAD, rtol=1e-6)


def test_series_are_batched_by_length_in_whole_patches(fake):
    context = [np.ones(3), np.ones(5), np.ones(8), np.ones(30), np.ones(2)]
    predict(context, 2, model=fake)
    assert sorted(fake.calls) == [(1, 32), (2, 4), (2, 8)]  # padded to whole patches of 4, never wider


def test_batch_size_splits_batches(fake):
    predict(np.ones((10, 8)), 2, model=fake, batch_size=3)
    assert [b for b, _ in fake.calls] == [3, 3, 3, 1]


def test_left_padding_is_nan(fake):
    predict([np.arange(1.0, 4.0)], 1, model=fake)
    row = fake.contexts[0][0]
    assert torch.isnan(row[0]) and row[1:].tolist() == [1.0, 2.0, 3.0]


def test_context_is_cut_to_the_last_steps(fake):
    predict(np.arange(100.0), 1, model=fake)  # default: config.context_length = 64
    assert fake.calls[-1] == (1, 64) and fake.contexts[-1][0, 0] == 36.0
    predict(np.arange(100.0), 1, model=fake, context_length=10)
    assert fake.calls[-1] == (1, 12)  # 10 kept, padded to 3 patches of 4
    assert fake.contexts[-1][0, 2:].tolist() == list(np.arange(90.0, 100.0))


def test_long_horizon_warns_once(fake):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        predict(np.arange(10.0), 12, model=fake)  # exactly the trained horizon: no warning
    with pytest.warns(UserWarning, match="exceeds the horizon the model was trained on \\(12 steps\\)") as record:
        predict(np.ones((600, 8)), 13, model=fake, batch_size=100)
    assert len([w for w in record if "trained on" in str(w.message)]) == 1


def test_quantile_levels_are_interpolated(fake):
    quantiles, median = predict(np.arange(5.0), 2, model=fake, quantile_levels=[0.25, 0.5, 0.75])
    np.testing.assert_allclose(quantiles[0, 0], 4.0 + np.array([-0.25, 0.0, 0.25]) * SPREAD, rtol=1e-6)
    np.testing.assert_array_equal(quantiles[..., 1], median)


def test_quantile_levels_outside_the_model_range_are_clamped_with_a_warning(fake):
    with pytest.warns(UserWarning, match=r"quantile levels \[0.01, 0.99\] lie outside"):
        quantiles, _ = predict(np.arange(5.0), 2, model=fake, quantile_levels=[0.01, 0.1, 0.9, 0.99])
    np.testing.assert_array_equal(quantiles[0, :, 0], quantiles[0, :, 1])
    np.testing.assert_array_equal(quantiles[0, :, 3], quantiles[0, :, 2])


def test_interpolate_quantiles_matches_numpy_interp():
    rng = np.random.default_rng(0)
    known = (0.1, 0.2, 0.5, 0.8, 0.9)
    values = np.sort(rng.normal(size=(3, 4, len(known))), axis=-1)
    wanted = [0.05, 0.1, 0.15, 0.33, 0.5, 0.85, 0.9, 0.95]
    out = interpolate_quantiles(values, known, wanted)
    expected = np.apply_along_axis(lambda v: np.interp(wanted, known, v), -1, values)
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    assert (np.diff(out, axis=-1) >= 0).all()
    np.testing.assert_array_equal(out[..., 1], values[..., 0])  # predicted levels come back exactly
    np.testing.assert_array_equal(out[..., 6], values[..., 4])


@pytest.mark.parametrize(
    ("context", "match"),
    [([], "context is empty"), (np.ones((0, 5)), "context is empty"), (np.ones((2, 3, 4)), "1-D \\[T\\] or 2-D"),
     ([np.ones(3), np.array([])], "context\\[1\\] is empty"),
     ([np.ones(3), np.full(4, np.nan)], "context\\[1\\] has no observed values"),
     (np.array([1.0, np.inf]), "infinite"), ("abc", "context must be an array"), ([np.ones((2, 2))], "must be 1-D")],
)
def test_predict_rejects_bad_context(fake, context, match):
    with pytest.raises(ForecastInputError, match=match):
        predict(context, 2, model=fake)


def test_all_nan_after_truncation_is_an_error(fake):
    context = np.concatenate([np.ones(10), np.full(70, np.nan)])
    with pytest.raises(ForecastInputError, match="no observed values in its last 64 steps"):
        predict(context, 2, model=fake)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"prediction_length": 0}, "prediction_length"), ({"batch_size": 0}, "batch_size"),
     ({"context_length": 0}, "context_length"), ({"quantile_levels": [0.5, 0.5]}, "repeated")],
)
def test_predict_rejects_bad_arguments(fake, kwargs, match):
    arguments = {"prediction_length": 3, **kwargs}
    with pytest.raises(ForecastInputError, match=match):
        predict(np.ones(5), model=fake, **arguments)


def test_model_on_another_device_is_not_moved(fake):
    with pytest.raises(ForecastInputError, match="the model is on cpu but device='meta'"):
        predict(np.ones(5), 2, model=fake, device="meta")
    with pytest.raises(ForecastInputError, match="device='gpu7' is not a torch device"):
        predict(np.ones(5), 2, model=fake, device="gpu7")


def test_training_mode_is_restored(fake):
    fake.train()
    predict(np.ones(5), 2, model=fake)
    assert fake.training


# ---------------------------------------------------------------------------------------------------------------
# predict_df(): DataFrames


def test_predict_df_columns_ids_and_timestamps(fake):
    frame = hourly_frame(ids=("B", "A"))
    out = predict_df(frame, 4, model=fake)
    assert list(out.columns) == ["item_id", "timestamp", "median", *[str(q) for q in DEFAULT_QUANTILE_LEVELS]]
    assert list(out["item_id"]) == ["B"] * 4 + ["A"] * 4  # order of first appearance, not sorted
    expected_b = pd.date_range(frame["timestamp"].iloc[19] + pd.Timedelta(hours=1), periods=4, freq="h")
    assert list(out["timestamp"].iloc[:4]) == list(expected_b)
    np.testing.assert_allclose(out["median"].iloc[:4], 119.0)
    np.testing.assert_array_equal(out["median"], out["0.5"])
    levels = out[[str(q) for q in DEFAULT_QUANTILE_LEVELS]].to_numpy()
    assert (np.diff(levels, axis=1) >= 0).all()


def test_predict_df_nixtla_dialect(fake):
    frame = hourly_frame(id_column="unique_id", timestamp_column="ds", target="y")
    out = predict_df(frame, 3, model=fake, id_column="unique_id", timestamp_column="ds", target="y")
    assert list(out.columns[:3]) == ["unique_id", "ds", "median"]
    assert out.groupby("unique_id").size().to_dict() == {"A": 3, "B": 3}


def test_predict_df_quantile_column_names(fake):
    out = predict_df(hourly_frame(), 2, model=fake, quantile_levels=[0.9, 0.25, 0.5])
    assert list(out.columns[3:]) == ["0.9", "0.25", "0.5"]


def test_predict_df_unsorted_input_and_nan_targets(fake):
    frame = hourly_frame()
    frame.loc[frame.index[-1], "target"] = np.nan  # B's last value is missing
    shuffled = frame.sample(frac=1.0, random_state=1)
    out = predict_df(shuffled, 2, model=fake)
    by_id = out.groupby("item_id")["median"].first()
    assert by_id["A"] == pytest.approx(119.0) and by_id["B"] == pytest.approx(213.0)
    assert out.groupby("item_id")["timestamp"].apply(lambda s: s.is_monotonic_increasing).all()


def test_predict_df_freq_fills_gaps_with_nan(fake):
    frame = hourly_frame(ids=("A",), lengths=(12,)).drop(index=[10])  # the second-last hour is missing
    with pytest.raises(ForecastInputError, match="irregular"):
        predict_df(frame, 2, model=fake)
    out = predict_df(frame, 2, model=fake, freq="h")
    context = fake.contexts[-1][0]
    assert torch.isnan(context[-2]) and context[-1] == 111.0
    assert out["timestamp"].iloc[0] == pd.Timestamp("2024-01-01 12:00")


def test_predict_df_integer_ids_keep_their_dtype(fake):
    frame = hourly_frame(ids=(7, 3))
    out = predict_df(frame, 2, model=fake)
    assert out["item_id"].tolist() == [7, 7, 3, 3] and pd.api.types.is_integer_dtype(out["item_id"])


def test_predict_df_rejects_bad_input_before_loading_a_model():
    with pytest.raises(ForecastInputError, match="prediction_length"):
        predict_df(hourly_frame(), -1, model="no-such-model")
    with pytest.raises(ForecastInputError, match="df has no column\\(s\\) target='value'"):
        predict_df(hourly_frame(), 2, model="no-such-model", target="value")


# ---------------------------------------------------------------------------------------------------------------
# Real data


def co2_frame() -> pd.DataFrame:
    """Mauna Loa CO2, weekly on Saturdays 1958-2001, with 59 missing weeks."""
    sm_co2 = pytest.importorskip("statsmodels.datasets.co2")
    data = sm_co2.load_pandas().data
    return pd.DataFrame({"item_id": "co2", "timestamp": data.index, "target": data["co2"].to_numpy()})


def m4_hourly_frame(n_series: int = 4) -> pd.DataFrame:
    """The first M4 hourly series in long format (start 1750-01-01 00:00, hourly, as GIFT-Eval converts them)."""
    if not M4_HOURLY.exists():
        pytest.skip(f"M4 hourly data not found at {M4_HOURLY} (shared/data/raw is provided by the project setup)")
    wide = pd.read_csv(M4_HOURLY, nrows=n_series, index_col=0)
    frames = []
    for item_id, row in wide.iterrows():
        values = row.dropna().to_numpy(dtype=float)
        stamps = pd.date_range("1750-01-01 00:00", periods=len(values), freq="h")
        frames.append(pd.DataFrame({"item_id": item_id, "timestamp": stamps, "target": values}))
    return pd.concat(frames, ignore_index=True)


def test_co2_weekly_with_missing_values(fake):
    frame = co2_frame()
    assert frame["target"].isna().sum() > 0
    out = predict_df(frame, 12, model=fake)
    assert len(out) == 12 and out["item_id"].eq("co2").all()
    assert pd.Timestamp(out["timestamp"].iloc[0]) == frame["timestamp"].iloc[-1] + pd.Timedelta(weeks=1)
    assert (out["timestamp"].dt.day_of_week == 5).all()  # W-SAT
    np.testing.assert_allclose(out["median"], frame["target"].dropna().iloc[-1], rtol=1e-6)


def test_m4_hourly_series():
    frame = m4_hourly_frame()
    out = predict_df(frame, 48, model=FakeForecaster(train_horizon_patches=12), quantile_levels=[0.1, 0.5, 0.9])
    assert list(pd.unique(out["item_id"])) == ["H1", "H2", "H3", "H4"]
    assert out.groupby("item_id").size().eq(48).all()
    ends = frame.groupby("item_id")["timestamp"].max()
    firsts = out.groupby("item_id")["timestamp"].min()
    assert (firsts - ends).eq(pd.Timedelta(hours=1)).all()


# ---------------------------------------------------------------------------------------------------------------
# The real Forecaster


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """A randomly initialised small Forecaster written as a checkpoint folder, to test loading by path."""
    from tsfm.checkpoint import save_model
    from tsfm.model import Forecaster

    torch.manual_seed(0)
    config = ModelConfig(backbone="transformer", d_model=32, n_layers=2, n_heads=2, context_length=256)
    return save_model(Forecaster(config), tmp_path_factory.mktemp("models") / "tiny")


def test_real_model_by_path(tiny_checkpoint):
    out = predict_df(hourly_frame(lengths=(100, 40)), 24, model=str(tiny_checkpoint))
    assert out.shape == (48, 3 + len(DEFAULT_QUANTILE_LEVELS))
    levels = out[[str(q) for q in DEFAULT_QUANTILE_LEVELS]].to_numpy()
    assert np.isfinite(levels).all() and (np.diff(levels, axis=1) >= 0).all()


def test_real_model_forecast_does_not_depend_on_batch_companions(tiny_checkpoint):
    from tsfm.checkpoint import load_model

    model = load_model(tiny_checkpoint)
    rng = np.random.default_rng(0)
    series = [rng.normal(size=n).cumsum() for n in (50, 64, 200, 61)]
    together, _ = predict(series, 8, model=model)
    alone = np.stack([predict(s, 8, model=model)[0][0] for s in series])
    np.testing.assert_allclose(together, alone, rtol=1e-4, atol=1e-4)


def test_default_model_on_co2_beats_last_years_mean():
    """A flat forecast at the last year's mean scores MAE 2.05 ppm on the final year (seasonal naive 1.50, an
    untrained model about 30): a trained model must follow the trend and the season to beat it."""
    frame = co2_frame()
    history, holdout = frame.iloc[:-52], frame.iloc[-52:]
    out = predict_df(history, 52, model="default")
    truth = holdout["target"].to_numpy()
    observed = ~np.isnan(truth)
    model_mae = np.abs(out["median"].to_numpy() - truth)[observed].mean()
    last_year_mean_mae = np.abs(history["target"].iloc[-52:].mean() - truth)[observed].mean()
    assert model_mae < last_year_mean_mae


def test_default_model_on_m4_hourly():
    frame = m4_hourly_frame()
    out = predict_df(frame, 48, model="default")
    levels = out[[str(q) for q in DEFAULT_QUANTILE_LEVELS]].to_numpy()
    assert np.isfinite(levels).all() and (np.diff(levels, axis=1) >= 0).all()
    assert to_offset(pd.infer_freq(out["timestamp"].iloc[:48])) == to_offset("h")


def test_infer_nonnegative_per_call_overrides_the_model_setting():
    """``predict(..., infer_nonnegative=)``: None follows the model's config, False keeps negative quantiles of a
    never-negative series, True clamps them; a model without the option still serves calls that leave it None."""
    from tsfm.df_utils import ForecastInputTypeError
    from tsfm.model import Forecaster

    torch.manual_seed(0)
    config = ModelConfig(backbone="gdn", d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         context_length=64, train_horizon_patches=2, infer_nonnegative=True)
    model = Forecaster(config).eval()
    rng = np.random.default_rng(0)
    series = [np.abs(rng.normal(0.0, 5.0, size=40)), rng.normal(0.0, 5.0, size=40)]  # never negative; mixed
    kept, _ = predict(series, 16, model=model, infer_nonnegative=False)
    assert (kept[0] < 0).any() and (kept[1] < 0).any(), "the test needs negative quantiles for both series"
    for value in (None, True):
        clamped, _ = predict(series, 16, model=model, infer_nonnegative=value)
        np.testing.assert_array_equal(clamped[0], kept[0].clip(min=0))
        np.testing.assert_array_equal(clamped[1], kept[1])  # a negative value in the context: left alone
    frame = pd.DataFrame({"item_id": "a", "timestamp": pd.date_range("2024-01-01", periods=40, freq="D"),
                          "target": series[0]})
    by_df = predict_df(frame, 16, model=model, infer_nonnegative=False)
    np.testing.assert_allclose(by_df["0.1"].to_numpy(), kept[0, :, 0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ForecastInputTypeError, match="infer_nonnegative must be True, False or None"):
        predict(series, 16, model=model, infer_nonnegative="no")
    fake = FakeForecaster()  # its forecast takes no such option: None must not pass one
    assert predict(np.arange(30.0), 4, model=fake)[0].shape == (1, 4, len(DEFAULT_QUANTILE_LEVELS))


def test_naive_blend_per_call_overrides_the_model_setting():
    """``predict(..., naive_blend=)``: None follows the model's config, "off" is the model's own forecast, and an
    exactly repeating season is forecast as Seasonal Naive with the blend on; a bad value names the field."""
    from tsfm.model import Forecaster

    torch.manual_seed(0)
    config = ModelConfig(backbone="gdn", d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         context_length=256, train_horizon_patches=2, naive_blend="inverse_mae")
    model = Forecaster(config).eval()
    season = np.tile(np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0, 8.0]), 12)
    blended, median = predict(season, 16, model=model)
    own, own_median = predict(season, 16, model=model, naive_blend="off")
    np.testing.assert_allclose(median[0], np.tile(season[-12:], 2)[:16], rtol=1e-4, atol=1e-4)
    assert not np.allclose(own_median, median, atol=1e-3)
    np.testing.assert_allclose(blended - median[..., None], own - own_median[..., None], rtol=1e-4, atol=1e-4)
    with pytest.raises(ForecastInputError, match="naive_blend must be one of"):
        predict(season, 16, model=model, naive_blend="on")
    fake = FakeForecaster()  # its forecast takes no such option: None must not pass one
    assert predict(np.arange(30.0), 4, model=fake)[0].shape == (1, 4, len(DEFAULT_QUANTILE_LEVELS))
