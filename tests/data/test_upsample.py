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


def test_pchip_keeps_every_value_without_the_kinks_of_linear():
    days = np.sin(np.arange(48) * 2 * np.pi / 24).astype(np.float32) * 10 + 20  # two hourly days
    linear, smooth = upsample(days, 12), upsample(days, 12, "pchip")
    assert smooth.dtype == np.float32 and smooth.shape == linear.shape
    np.testing.assert_array_equal(smooth[::12], days)
    # no overshoot: every fine step lies between the two observed steps around it
    low = np.minimum(days[:-1], days[1:]).repeat(12)
    high = np.maximum(days[:-1], days[1:]).repeat(12)
    assert np.all(smooth[:-1] >= low - 1e-4) and np.all(smooth[:-1] <= high + 1e-4)
    # a kink is a jump of the slope at an observed step: linear's are as large as the curvature, pchip's far smaller
    def kinks(values):
        slopes = np.diff(values)
        return np.abs(slopes[12::12] - slopes[11:-1:12]).max()
    assert kinks(smooth) < kinks(linear) / 5
    # and it is as close to the true 5-minute sine as linear, or closer
    truth = np.sin(np.arange(smooth.size) / 12 * 2 * np.pi / 24) * 10 + 20
    assert np.abs(smooth - truth).max() < np.abs(linear - truth).max()


def test_pchip_follows_a_straight_line_and_leaves_missing_steps_missing():
    np.testing.assert_allclose(upsample(np.arange(5, dtype=np.float32) * 3, 4, "pchip"), np.arange(17) * 0.75,
                               atol=1e-6)
    series = np.array([1.0, np.nan, 3.0, 5.0, 4.0, np.nan, 7.0], dtype=np.float32)
    smooth, linear = upsample(series, 3, "pchip"), upsample(series, 3)
    np.testing.assert_array_equal(np.isnan(smooth), np.isnan(linear))
    np.testing.assert_array_equal(smooth[::3], series)  # a lone observed step (7.0 after a gap) kept too


def test_upsample_refuses_an_unknown_method():
    with pytest.raises(UpsampleError, match="method must be one of linear, pchip, got 'cubic'"):
        upsample(np.arange(5.0), 2, "cubic")
    with pytest.raises(UpsampleError, match="method must be one of"):
        add_upsampled(Corpus(), {"H": 2}, method="spline")


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
    smooth = _corpus()
    assert add_upsampled(smooth, {"H": 3}, method="pchip") == 2
    np.testing.assert_array_equal(smooth.series[-1], upsample(np.arange(10, dtype=np.float32), 3, "pchip"))
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


@pytest.mark.parametrize("method", [[], ["--upsample-method", "pchip"]])
def test_cli_train_upsamples_the_training_series_only(tmp_path, capsys, method):
    _write_root(tmp_path / "root")
    _, validation = load_corpus(tmp_path / "root", validation_share=0.3)
    argv = ["train", "--out", str(tmp_path / "run"), "--real-data", str(tmp_path / "root"), "--steps", "1",
            "--batch-size", "4", "--context-length", "64", "--pool-size", "8", "--val-every", "1",
            "--validation-share", "0.3", "--accelerator", "cpu"]
    assert main([*argv, "--upsample-real", "H=12", *method]) == 0
    data = json.loads((tmp_path / "run" / "model" / "config.json").read_text())["training"]["data"]
    hourly_in_training = 4 - sum(d == "hourly" for d in validation.datasets)
    assert f"{hourly_in_training} of them upsampled copies (H=12, {method[-1] if method else 'linear'})" in data
    assert f"; {len(validation)} held out" in data  # the validation split is the one without upsampling
    capsys.readouterr()


@pytest.mark.parametrize("extra, message", [
    (["--upsample-real", "H=12"], "--upsample-real needs --real-data"),
    (["--real-data", "ROOT", "--upsample-real", "H=twelve"], "--upsample-real: expected FREQ=FACTOR"),
    (["--real-data", "ROOT", "--upsample-real", "M=2"], "--upsample-real: frequency 'M' has no fixed step"),
    (["--real-data", "ROOT", "--upsample-real", "10T=2"], "no training series under"),
    (["--real-data", "ROOT", "--upsample-method", "pchip"], "--upsample-method needs --upsample-real"),
])
def test_cli_train_refuses_an_upsampling_it_cannot_do(tmp_path, capsys, extra, message):
    _write_root(tmp_path / "root")
    extra = [str(tmp_path / "root") if item == "ROOT" else item for item in extra]
    assert main(["train", "--out", str(tmp_path / "run"), "--steps", "1", *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
