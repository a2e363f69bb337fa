"""Real series on a finer grid (``tsfm.pipelines.data.upsample``) and ``tsfm train --upsample-real``."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from tsfm.cli import main
from tsfm.pipelines.data.corpus import Corpus, load_corpus
from tsfm.pipelines.data.gift_format import write_dataset
from tsfm.pipelines.data.upsample import (
    UpsampleError,
    add_upsampled,
    parse_upsampling,
    upsample,
    upsampled_frequency,
)


def test_upsample_keeps_every_value_and_is_linear_between_them():
    out = upsample(np.array([0.0, 12.0, 6.0], dtype=np.float32), 4)
    np.testing.assert_array_equal(out, [0, 3, 6, 9, 12, 10.5, 9, 7.5, 6])
    assert out.dtype == np.float32


def test_upsample_leaves_the_steps_next_to_a_missing_value_missing():
    out = upsample(np.array([1.0, np.nan, 3.0, 5.0], dtype=np.float32), 2)
    np.testing.assert_array_equal(np.isnan(out), [False, True, True, True, False, False, False])
    np.testing.assert_array_equal(out[[0, 4, 5, 6]], [1, 3, 4, 5])


def _step_correlation(values: np.ndarray) -> float:
    steps = np.diff(values[np.isfinite(values)].astype(np.float64))
    return float(np.corrcoef(steps[:-1], steps[1:])[0, 1])


def test_bridge_keeps_every_value_and_gives_the_fine_steps_a_sensors_texture():
    rng = np.random.default_rng(0)
    hours = np.sin(np.arange(24 * 20) * 2 * np.pi / 24) * 10 + 20 + rng.normal(0, 1, 24 * 20)
    linear, bridge = upsample(hours, 12), upsample(hours, 12, 1.0, np.random.default_rng(1))
    assert bridge.dtype == np.float32 and bridge.shape == linear.shape
    np.testing.assert_array_equal(bridge[::12], hours.astype(np.float32))
    # linear's steps within an hour are all equal (consecutive steps correlate); the bridge's move almost freely
    assert _step_correlation(linear) > 0.8 and abs(_step_correlation(bridge)) < 0.2
    assert bridge.min() >= hours.min() - 1e-5 and bridge.max() <= hours.max() + 1e-5
    # no drift: over many draws the bridge averages to the line (but where clipping at the series' extremes cuts)
    mean = np.mean([upsample(hours[:50], 12, 1.0, np.random.default_rng(seed)) for seed in range(400)], axis=0)
    assert np.abs(mean - linear[:mean.size]).mean() < 0.05


def test_bridge_keeps_flat_intervals_flat_and_missing_steps_missing():
    solar = np.array([0, 0, 0, 5, 40, 60, 30, 0, 0, np.nan, 2, 0], dtype=np.float32)
    out = upsample(solar, 6, 1.0, np.random.default_rng(0))
    np.testing.assert_array_equal(out[:13], 0)  # the night (steps 0-2): no noise, never negative
    np.testing.assert_array_equal(out[42:49], 0)  # and the next (steps 7-8)
    assert np.any(out[13:18] != np.linspace(0, 5, 7)[1:-1])  # the morning's rise does get texture
    np.testing.assert_array_equal(np.isnan(out), np.isnan(upsample(solar, 6)))
    assert np.nanmin(out) >= 0
    same = upsample(solar, 6, 1.0, np.random.default_rng(0))
    np.testing.assert_array_equal(out, same)  # reproducible from the generator
    half = upsample(solar, 6, 0.5, np.random.default_rng(0))  # the same draws at half the spread
    unclipped = (same > 0) & (same < 60)  # the clip to the observed range bounds each draw on its own
    np.testing.assert_allclose((half - upsample(solar, 6))[unclipped], 0.5 * (same - upsample(solar, 6))[unclipped],
                               atol=1e-4)
    with pytest.raises(UpsampleError, match="pass rng"):
        upsample(solar, 6, 0.5)


@pytest.mark.parametrize("texture", [-0.1, float("nan"), float("inf")])
def test_upsample_refuses_a_texture_that_is_not_a_finite_number_above_zero(texture):
    with pytest.raises(UpsampleError, match="texture must be a finite number >= 0"):
        upsample(np.arange(5.0), 2, texture, np.random.default_rng(0))
    with pytest.raises(UpsampleError, match="texture must be a finite number >= 0"):
        add_upsampled(Corpus(), {"H": 2}, texture=texture)


@pytest.mark.parametrize("factor", [1, 0, -2, 2.5, True])
def test_upsample_refuses_a_factor_that_is_not_an_integer_above_one(factor):
    with pytest.raises(UpsampleError, match="factor must be an integer >= 2"):
        upsample(np.arange(5.0), factor)


def test_upsample_refuses_a_series_it_cannot_interpolate():
    with pytest.raises(UpsampleError, match="at least 2 steps"):
        upsample(np.array([1.0]), 2)
    with pytest.raises(UpsampleError, match="one-dimensional"):
        upsample(np.zeros((2, 3)), 2)


@pytest.mark.parametrize("freq, factor, finer", [
    ("H", 12, "5T"), ("h", 12, "5T"), ("30T", 6, "5T"), ("30min", 6, "5T"), ("10T", 2, "5T"), ("D", 24, "H"),
    ("2H", 4, "30T"), ("15T", 2, "450S"), ("D", 288, "5T"),
])
def test_upsampled_frequency_divides_the_step(freq, factor, finer):
    assert upsampled_frequency(freq, factor) == finer


@pytest.mark.parametrize("freq, factor, message", [
    ("M", 2, "no fixed step"), ("W-SUN", 2, "no fixed step"), ("B", 2, "no fixed step"), ("A-DEC", 2, "no fixed step"),
    ("fortnightly", 2, "no fixed step"), ("S", 2, "not a whole number of seconds (0.5 s)"),
    ("H", 7, "not a whole number of seconds"), ("H", 1, "factor must be an integer >= 2"),
])
def test_upsampled_frequency_refuses_what_cannot_be_divided(freq, factor, message):
    with pytest.raises(UpsampleError, match=re.escape(message)):
        upsampled_frequency(freq, factor)


def test_parse_upsampling_reads_and_checks_every_item():
    assert parse_upsampling("H=12, 30min=6,10T=2") == {"H": 12, "30min": 6, "10T": 2}
    for text, message in [("H", "FREQ=FACTOR"), ("H=x", "FREQ=FACTOR"), ("=12", "FREQ=FACTOR"), ("H=-2", "FREQ=FACTOR"),
                          ("H=12,60min=3", "given twice"), ("M=2", "no fixed step"), ("H=1", ">= 2")]:
        with pytest.raises(UpsampleError, match=message):
            parse_upsampling(text)


def _corpus() -> Corpus:
    corpus = Corpus()
    corpus.append(np.arange(10, dtype=np.float32), "hourly", freq="H")
    corpus.append(np.arange(10, dtype=np.float32), "hourly", freq="H")
    corpus.append(np.arange(6, dtype=np.float32), "half-hourly", freq="30min")
    corpus.append(np.arange(20, dtype=np.float32), "monthly", freq="M")
    corpus.append(np.arange(20, dtype=np.float32), "unknown")
    return corpus


def test_add_upsampled_appends_finer_copies_as_datasets_of_their_own():
    corpus = _corpus()
    assert add_upsampled(corpus, {"60min": 12, "30T": 6}) == 3  # "60min" is the hourly step, spelled otherwise
    assert corpus.datasets[5:] == ["hourly x12", "hourly x12", "half-hourly x6"]
    assert corpus.frequencies[5:] == ["5T"] * 3
    np.testing.assert_array_equal(corpus.series[5], upsample(np.arange(10, dtype=np.float32), 12))
    assert corpus.series[7].size == 31 and corpus.score_from[5:] == [0, 0, 0]
    weights = corpus.weights / corpus.weights.sum()
    assert weights[5:].sum() == pytest.approx(2 / 6)  # two new datasets of six, each one dataset's share


def test_add_upsampled_keeps_the_last_steps_and_leaves_other_frequencies_alone():
    corpus = _corpus()
    assert add_upsampled(corpus, {"H": 3}, max_length=7) == 2
    np.testing.assert_allclose(corpus.series[-1], [7, 7 + 1 / 3, 7 + 2 / 3, 8, 8 + 1 / 3, 8 + 2 / 3, 9], rtol=1e-6)
    assert add_upsampled(_corpus(), {"D": 2}) == 0
    textured, again = _corpus(), _corpus()
    assert add_upsampled(textured, {"H": 3}, texture=0.5, seed=5) == 2
    add_upsampled(again, {"H": 3}, texture=0.5, seed=5)
    np.testing.assert_array_equal(textured.series[-1], again.series[-1])  # the seed fixes the copies
    assert not np.array_equal(textured.series[-1], textured.series[-2])  # each copy draws its own texture
    np.testing.assert_array_equal(textured.series[-1][::3], np.arange(10))
    with pytest.raises(UpsampleError, match="factor must be"):
        add_upsampled(_corpus(), {"H": 1})


def _write_root(root) -> None:
    start = pd.Timestamp("2020-01-01")
    write_dataset(root / "hourly", [{"item_id": f"h{i}", "start": start, "freq": "H",
                                     "target": np.sin(np.arange(400) * 2 * np.pi / 24).astype(np.float32)}
                                    for i in range(4)])
    write_dataset(root / "monthly", [{"item_id": f"m{i}", "start": start, "freq": "M",
                                      "target": np.arange(120, dtype=np.float32)} for i in range(4)])


def test_load_corpus_records_each_series_frequency(tmp_path):
    _write_root(tmp_path / "root")
    train, validation = load_corpus(tmp_path / "root", validation_share=0.0)
    assert sorted(set(zip(train.datasets, train.frequencies, strict=True))) == [("hourly", "H"), ("monthly", "M")]
    assert not len(validation)


@pytest.mark.parametrize("texture", [[], ["--upsample-texture", "0.5"]])
def test_cli_train_upsamples_the_training_series_only(tmp_path, capsys, texture):
    _write_root(tmp_path / "root")
    _, validation = load_corpus(tmp_path / "root", validation_share=0.3)
    argv = ["train", "--out", str(tmp_path / "run"), "--real-data", str(tmp_path / "root"), "--steps", "1",
            "--batch-size", "4", "--context-length", "64", "--pool-size", "8", "--val-every", "1",
            "--validation-share", "0.3", "--accelerator", "cpu"]
    assert main([*argv, "--upsample-real", "H=12", *texture]) == 0
    data = json.loads((tmp_path / "run" / "model" / "config.json").read_text())["training"]["data"]
    hourly_in_training = 4 - sum(d == "hourly" for d in validation.datasets)
    shape = ", texture 0.5" if texture else ""
    assert f"{hourly_in_training} of them upsampled copies (H=12{shape})" in data
    assert f"; {len(validation)} held out" in data  # the validation split is the one without upsampling
    capsys.readouterr()


@pytest.mark.parametrize("extra, message", [
    (["--upsample-real", "H=12"], "--upsample-real needs --real-data"),
    (["--real-data", "ROOT", "--upsample-real", "H=twelve"], "--upsample-real: expected FREQ=FACTOR"),
    (["--real-data", "ROOT", "--upsample-real", "M=2"], "--upsample-real: frequency 'M' has no fixed step"),
    (["--real-data", "ROOT", "--upsample-real", "10T=2"], "no training series under"),
    (["--real-data", "ROOT", "--upsample-texture", "0.5"], "--upsample-texture needs --upsample-real"),
    (["--real-data", "ROOT", "--upsample-real", "H=12", "--upsample-texture", "-1"],
     "--upsample-texture: texture must be a finite number >= 0, got -1.0"),
])
def test_cli_train_refuses_an_upsampling_it_cannot_do(tmp_path, capsys, extra, message):
    _write_root(tmp_path / "root")
    extra = [str(tmp_path / "root") if item == "ROOT" else item for item in extra]
    assert main(["train", "--out", str(tmp_path / "run"), "--steps", "1", *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
