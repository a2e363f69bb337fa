"""The GIFT-Eval protocol: the gluonts adapter, the baselines, all_results.csv, normalisation, the CLI commands.

Runs on a tiny synthetic benchmark written to tmp (uni- and multivariate) and a tiny random tsfm model; the
m4_hourly check runs when the raw data is in ../shared (skipped with the reason otherwise).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("gluonts")
pytest.importorskip("statsforecast")

from gluonts.model.forecast import QuantileForecast

from tsfm.cli import main
from tsfm.pipelines.baselines import BASELINES, StatsForecastPredictor, interval_columns
from tsfm.pipelines.data.gift_eval import BENCHMARK_FILE
from tsfm.pipelines.data.gift_format import write_dataset
from tsfm.pipelines.data.paths import raw_dir
from tsfm.pipelines.evaluate import (
    CRPS,
    MASE,
    RESULT_COLUMNS,
    BenchmarkError,
    UnknownConfigError,
    UnknownModelError,
    eval_model,
    evaluate,
    geometric_mean,
    normalise,
    paired_ratio_interval,
    select_configs,
    summarise,
    with_inference,
)
from tsfm.pipelines.predictor import (
    QUANTILE_LEVELS,
    LevelIndexedQuantileForecast,
    TsfmPredictor,
    make_quantile_forecast,
)

KEYS = ["0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"]


def write_synthetic_benchmark(root: Path) -> Path:
    """Two datasets: ``synth/H`` (3 hourly series, short term) and ``synth_multi`` (1 daily series x 2 variates)."""
    rng = np.random.default_rng(0)
    t = np.arange(300)
    hourly = [
        {
            "item_id": f"s{i}",
            "start": pd.Timestamp("2020-01-01") + pd.Timedelta(hours=i),
            "freq": "H",
            "target": (10 + i + np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(300)).astype(np.float32),
        }
        for i in range(3)
    ]
    daily = [
        {
            "item_id": "m0",
            "start": pd.Timestamp("2021-03-01"),
            "freq": "D",
            "target": (5 + np.stack([np.sin(2 * np.pi * t / 7), np.cos(t / 9)]) + 0.1 * rng.standard_normal((2, 300)))
            .astype(np.float32),
        }
    ]
    write_dataset(root / "synth" / "H", hourly)
    write_dataset(root / "synth_multi", daily)
    listing = {
        "configurations": [
            {"dataset": "synth/H", "term": "short", "key": "synth/H/short"},
            {"dataset": "synth_multi", "term": "short", "key": "synth_multi/D/short"},
        ],
        "build_seconds": 0.1,
    }
    (root / BENCHMARK_FILE).write_text(json.dumps(listing))
    return root


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_benchmark(tmp_path_factory.mktemp("bench"))


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tsfm.checkpoint import save_model
    from tsfm.config import ModelConfig
    from tsfm.model import Forecaster

    config = ModelConfig(backbone="transformer", d_model=32, n_layers=2, n_heads=2, context_length=128)
    return save_model(Forecaster(config), tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="module")
def evaluated(bench: Path, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("results")
    report = evaluate(["seasonal_naive", "naive", str(tiny_model_dir)], bench, out=out, progress=False)
    return out, report


def _entries(n: int = 2, length: int = 100) -> list[dict]:
    return [
        {"item_id": f"x{i}", "start": pd.Period("2020-01-01 00:00", freq="h"), "target": np.arange(length + i) * 1.0}
        for i in range(n)
    ]


# ------------------------------------------------------------------------------------------------ adapter


def test_adapter_returns_quantile_forecasts(tiny_model_dir: Path) -> None:
    from tsfm.checkpoint import load_model
    from tsfm.forecast import predict

    model = load_model(tiny_model_dir)
    entries = _entries()
    forecasts = list(TsfmPredictor(model, 12, batch_size=1).predict(entries))
    assert len(forecasts) == 2
    expected_q, _ = predict([e["target"] for e in entries], 12, model=model, quantile_levels=QUANTILE_LEVELS)
    for entry, forecast, q in zip(entries, forecasts, expected_q, strict=True):
        assert isinstance(forecast, QuantileForecast)
        assert forecast.item_id == entry["item_id"]
        assert forecast.start_date == entry["start"] + len(entry["target"])
        assert forecast.forecast_keys == [*KEYS, "mean"]
        assert forecast.forecast_array.shape == (10, 12)
        np.testing.assert_allclose(forecast.quantile("0.9"), q[:, -1], rtol=1e-6)
        np.testing.assert_array_equal(forecast.mean, forecast.quantile("0.5"))


def test_level_indexed_forecast_answers_as_gluonts_quantile_forecast_does() -> None:
    """The adapter's forecasts look their own levels up in a dict (gluonts re-parses its keys on every call); every
    answer is gluonts' own: the held levels as floats or strings, a level between two (interpolated), the tails and
    "p90"."""
    rng = np.random.default_rng(0)
    quantiles = np.sort(rng.normal(size=(6, 9)), axis=1)  # [H, Q]
    entry = {"item_id": "a", "start": pd.Period("2020-01-01", freq="D"), "target": rng.normal(size=20)}
    ours = make_quantile_forecast(quantiles, QUANTILE_LEVELS, entry)
    plain = QuantileForecast(ours.forecast_array, ours.start_date, ours.forecast_keys, item_id="a")
    assert type(ours) is LevelIndexedQuantileForecast and isinstance(ours, QuantileForecast)
    for level in [*QUANTILE_LEVELS, *KEYS, "0.10", 0.15, 0.05, 0.95, "p90", "p25"]:
        np.testing.assert_array_equal(ours.quantile(level), plain.quantile(level), err_msg=repr(level))
    for name in ("mean", "median", "0.3", 0.7):
        np.testing.assert_array_equal(ours[name], plain[name], err_msg=repr(name))
    assert ours.quantile(0.3) is ours.quantile("0.3")  # held: the stored row, not a copy


def test_adapter_handles_all_nan_context_and_rejects_multivariate(tiny_model_dir: Path) -> None:
    from tsfm.checkpoint import load_model

    predictor = TsfmPredictor(load_model(tiny_model_dir), 5)
    entry = {"item_id": "nan", "start": pd.Period("2020-01", freq="M"), "target": np.full(30, np.nan)}
    (forecast,) = predictor.predict([entry])
    assert np.isfinite(forecast.forecast_array).all()
    multi = {"item_id": "mv", "start": pd.Period("2020-01", freq="M"), "target": np.ones((2, 30))}
    with pytest.raises(ValueError, match="per variate"):
        list(predictor.predict([multi]))


def test_baseline_intervals_become_quantiles() -> None:
    assert interval_columns([0.1, 0.5, 0.9]) == ([80], ["model-lo-80", "model", "model-hi-80"])
    levels, columns = interval_columns(QUANTILE_LEVELS)
    assert levels == [20, 40, 60, 80] and columns[4] == "model"
    entries = _entries(3, 60)
    for i, e in enumerate(entries):
        e["target"] = e["target"] + np.random.default_rng(i).standard_normal(len(e["target"]))
    entries[0]["target"][5:9] = np.nan  # imputed, as GIFT-Eval's wrapper does
    forecasts = list(StatsForecastPredictor("auto_theta", 6, season_length=24).predict(entries))
    assert [f.item_id for f in forecasts] == ["x0", "x1", "x2"]
    for f in forecasts:
        values = np.stack([f.quantile(k) for k in KEYS])
        assert values.shape == (9, 6) and np.isfinite(values).all()
        # intervals nest (Theta's are simulated, so the point forecast at 0.5 may sit off-centre, as in GIFT-Eval)
        assert (np.diff(values[:4], axis=0) > 0).all() and (np.diff(values[5:], axis=0) > 0).all()
        np.testing.assert_array_equal(values[4], f.mean)


def test_baseline_non_finite_rows_fall_back_to_seasonal_naive() -> None:
    """An exploding model (inf) is redone with Seasonal Naive: gluonts would reject the forecast as NaN."""
    calls = []

    class Exploding(StatsForecastPredictor):
        def _run(self, model: object, series: list[np.ndarray]) -> np.ndarray:
            calls.append(type(model).__name__)
            out = np.ones((len(series), self.prediction_length, 10), dtype=np.float32)
            if len(calls) == 1:
                out[1, 2, 3] = np.inf
            return out * len(calls)

    values = Exploding("auto_ets", 4, season_length=1)._forecast([np.ones(20), np.ones(20)])
    assert calls == ["AutoETS", "SeasonalNaive"]
    assert (values[0] == 1).all() and (values[1] == 2).all()


def test_baseline_history_caps() -> None:
    assert BASELINES["seasonal_naive"].context_length(720) is None  # full history: its intervals use all residuals
    assert BASELINES["auto_ets"].context_length(48) == 500 and BASELINES["auto_theta"].context_length(720) == 1440
    assert BASELINES["auto_arima"].context_length(48) == 300
    assert BASELINES["auto_arima"].context_length(720) == 1440  # two horizons, so drift does not run away


# ------------------------------------------------------------------------------------------------ evaluate


def test_all_results_columns_and_keys(evaluated: tuple[Path, dict], tiny_model_dir: Path) -> None:
    out, report = evaluated
    assert set(report) == {"seasonal_naive", "naive", "tiny"}
    for model in report:
        frame = pd.read_csv(out / model / "all_results.csv")
        assert tuple(frame.columns) == RESULT_COLUMNS
        assert list(frame["dataset"]) == ["synth/H/short", "synth_multi/D/short"]
        assert set(frame["model"]) == {model}
        assert list(frame["num_variates"]) == [1, 2]
        assert frame[[MASE, CRPS]].notna().all().all()
        run = json.loads((out / model / "run.json").read_text())
        assert run["configurations"] == 2 and run["wall_seconds"] >= 0
        assert set(run["geometric_mean"]) == {"overall", "short"}
    assert report["tiny"]["run"]["settings"]["checkpoint"] == str(tiny_model_dir)


def test_seasonal_naive_normalises_to_one(evaluated: tuple[Path, dict]) -> None:
    _, report = evaluated
    run = report["seasonal_naive"]["run"]
    assert all(v == {"MASE": 1.0, "CRPS": 1.0} for v in run["normalised"].values())
    assert run["geometric_mean"]["overall"]["MASE"] == pytest.approx(1.0)
    naive = report["naive"]
    base = report["seasonal_naive"]["rows"]
    expected = naive["rows"][MASE].to_numpy() / base[MASE].to_numpy()
    assert naive["run"]["geometric_mean"]["overall"]["MASE"] == pytest.approx(math.prod(expected) ** 0.5)


def test_rerun_merges_rows(bench: Path, evaluated: tuple[Path, dict]) -> None:
    out, _ = evaluated
    before = pd.read_csv(out / "naive" / "all_results.csv")
    evaluate(["naive"], bench, configs=["synth/H/short"], out=out, progress=False)
    after = pd.read_csv(out / "naive" / "all_results.csv")
    assert sorted(after["dataset"]) == sorted(before["dataset"])
    run = json.loads((out / "naive" / "run.json").read_text())
    assert run["configurations"] == 2 and set(run["normalised"]) == set(before["dataset"])


RAW = raw_dir()


@pytest.mark.skipif(not (RAW / "m4_hourly_train.csv").is_file(), reason=f"m4_hourly raw data not found in {RAW}")
def test_m4_hourly_matches_gift_eval(tmp_path: Path) -> None:
    """Published Seasonal Naive on m4_hourly/H/short: MASE 1.193, CRPS 0.038 (statsforecast with quantiles)."""
    from tsfm.pipelines.data.build import build_benchmark

    build_benchmark(tmp_path / "bench", datasets=["m4_hourly"], progress=False)
    report = evaluate(["seasonal_naive", "naive"], tmp_path / "bench", out=tmp_path / "out", progress=False)
    sn = report["seasonal_naive"]["rows"].iloc[0]
    assert sn["dataset"] == "m4_hourly/H/short" and sn["domain"] == "Econ/Fin"
    assert round(sn[MASE], 6) == 1.193210
    assert round(sn[CRPS], 3) == 0.038
    assert round(report["naive"]["rows"].iloc[0][MASE], 6) == 11.607688


# ------------------------------------------------------------------------------------------------ aggregation


def test_geometric_mean_known_values() -> None:
    assert geometric_mean([1.0, 4.0]) == pytest.approx(2.0)
    assert geometric_mean(np.array([2.0, 8.0, 4.0])) == pytest.approx(4.0)
    for bad in ([1.0, 0.0], [1.0, -2.0], [1.0, np.nan], []):
        with pytest.raises(ValueError):
            geometric_mean(bad)



def test_paired_ratio_interval_separates_a_clear_gain_from_noise() -> None:
    rng = np.random.default_rng(1)
    reference = rng.uniform(0.5, 2.0, 40)
    clear = reference * 0.8 * np.exp(rng.normal(0, 0.05, 40))  # 20% lower everywhere, a little noise
    ratio, low, high = paired_ratio_interval(clear, reference)
    assert ratio == pytest.approx(geometric_mean(clear) / geometric_mean(reference))
    assert low < 0.8 < high < 1.0
    mixed = reference * np.where(np.arange(40) % 2 == 0, 0.5, 2.0)  # halves half of them, doubles the rest
    ratio, low, high = paired_ratio_interval(mixed, reference)
    assert ratio == pytest.approx(1.0) and low < 1.0 < high
    assert paired_ratio_interval(reference * 0.9, reference) == pytest.approx((0.9, 0.9, 0.9))
    for scores, ref in (([1.0, 2.0], [1.0]), ([1.0], [1.0]), ([1.0, 0.0], [1.0, 1.0]), ([1.0, np.nan], [1.0, 2.0])):
        with pytest.raises(ValueError):
            paired_ratio_interval(scores, ref)

def test_normalise_and_summarise_per_term() -> None:
    rows = [
        ("a/H/short", "seasonal_naive", 2.0, 0.2),
        ("b/H/long", "seasonal_naive", 4.0, 0.4),
        ("a/H/short", "m", 1.0, 0.05),
        ("b/H/long", "m", 4.0, 0.8),
    ]
    frame = pd.DataFrame(rows, columns=["dataset", "model", MASE, CRPS])
    norm = normalise(frame, frame[frame["model"] == "seasonal_naive"])
    m = norm[norm["model"] == "m"].set_index("dataset")
    assert m.loc["a/H/short", "MASE"] == 0.5 and m.loc["b/H/long", "CRPS"] == 2.0
    summary = summarise(norm)["m"]
    assert summary["overall"]["MASE"] == pytest.approx(math.sqrt(0.5 * 1.0))
    assert summary["overall"]["CRPS"] == pytest.approx(math.sqrt(0.25 * 2.0))
    assert summary["short"] == {"MASE": 0.5, "CRPS": 0.25, "n": 1}
    assert "medium" not in summary


# ------------------------------------------------------------------------------------------------ bad input


def test_bad_benchmark_config_and_model(tmp_path: Path, bench: Path) -> None:
    with pytest.raises(BenchmarkError, match="not a benchmark"):
        select_configs(tmp_path)
    with pytest.raises(BenchmarkError, match="does not exist"):
        select_configs(tmp_path / "missing")
    with pytest.raises(UnknownConfigError, match="synth/H/short"):
        select_configs(bench, ["nope/H/short"])
    assert select_configs(bench, ["synth_multi"]) == [("synth_multi", "short")]
    with pytest.raises(UnknownModelError, match="auto_arima"):
        eval_model("no-such-model")



def test_with_inference_overrides_only_inference_fields(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The copy reads the same weights with the settings changed; anything but an inference field, or a bad value,
    fails before a folder is made."""
    copy = with_inference(tiny_model_dir, tmp_path / "copy", decoding="autoregressive", infer_nonnegative=True)
    model = json.loads((copy / "config.json").read_text())["model"]
    original = json.loads((tiny_model_dir / "config.json").read_text())["model"]
    assert (model["decoding"], model["infer_nonnegative"]) == ("autoregressive", True)
    assert {k: v for k, v in model.items() if k not in ("decoding", "infer_nonnegative")} == {
        k: v for k, v in original.items() if k not in ("decoding", "infer_nonnegative")}
    weights = sorted(f.name for f in tiny_model_dir.iterdir() if f.name != "config.json")
    assert weights and all((copy / name).resolve() == (tiny_model_dir / name).resolve() for name in weights)
    with pytest.raises(ValueError, match="not d_model"):
        with_inference(tiny_model_dir, tmp_path / "bad", d_model=8)
    with pytest.raises(ValueError, match="decoding"):
        with_inference(tiny_model_dir, tmp_path / "bad", decoding="sideways")
    assert not (tmp_path / "bad").exists()

def test_gift_eval_root_with_some_datasets(tmp_path: Path) -> None:
    """A GIFT-Eval download (no benchmark.json) gets the official configurations of the folders it has."""
    entry = {"item_id": "e", "start": pd.Timestamp("2016-07-01"), "freq": "H", "target": np.ones(2000, np.float32)}
    write_dataset(tmp_path / "ett1" / "H", [entry])
    with pytest.warns(UserWarning, match="94 of GIFT-Eval's 97"):
        configs = select_configs(tmp_path)
    assert configs == [("ett1/H", "short"), ("ett1/H", "medium"), ("ett1/H", "long")]


# ------------------------------------------------------------------------------------------------ CLI


def test_cli_evaluate(bench: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["evaluate", "--model", "naive", "--benchmark", str(bench), "--configs", "synth/H/short",
                 "--out", str(tmp_path), "--quiet"])
    assert code == 0
    assert "naive" in capsys.readouterr().out
    assert (tmp_path / "naive" / "all_results.csv").is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "naive", "--benchmark", "{tmp}"], "not a benchmark"),
        (["--model", "naive", "--benchmark", "{bench}", "--configs", "x/H/short"], "unknown configuration"),
        (["--model", "nope", "--benchmark", "{bench}"], "unknown model"),
        (["--model", "small", "--benchmark", "{bench}"], "no longer ships with the package"),
    ],
)
def test_cli_evaluate_bad_input_exits_2(
    argv: list[str], message: str, bench: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a.format(tmp=tmp_path, bench=bench) for a in argv]
    assert main(["evaluate", *args, "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_cli_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "build-benchmark", "--out", str(tmp_path), "--datasets", "nope", "--quiet"]) == 2
    assert "not benchmark datasets" in capsys.readouterr().err
    if not (RAW / "m4_hourly_train.csv").is_file():
        pytest.skip(f"m4_hourly raw data not found in {RAW}")
    assert main(["data", "build-benchmark", "--out", str(tmp_path), "--datasets", "m4_hourly", "--quiet"]) == 0
    assert "m4_hourly/H/short" in capsys.readouterr().out
    assert (tmp_path / BENCHMARK_FILE).is_file()
