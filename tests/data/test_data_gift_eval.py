"""GIFT-Eval's dataset logic: prediction lengths, windows, test instances, the 97 configurations."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsfm.pipelines.data.gift_eval import (
    GIFT_EVAL_CONFIGS,
    MED_LONG_DATASETS,
    SHORT_DATASETS,
    GiftEvalDataset,
    SeriesTooShortError,
    Term,
    base_prediction_length,
    config_key,
    configurations,
    num_windows,
    prediction_length,
    to_univariate,
)
from tsfm.pipelines.data.gift_format import write_dataset


def _write(root: Path, name: str, freq: str, lengths: list[int], variates: int = 1) -> Path:
    entries = []
    for i, n in enumerate(lengths):
        shape = (variates, n) if variates > 1 else (n,)
        target = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1000 * i
        entries.append({"item_id": f"item{i}", "start": pd.Timestamp("2000-01-01"), "freq": freq, "target": target})
    return write_dataset(root / name, entries)


@pytest.mark.parametrize(
    ("name", "freq", "term", "expected"),
    [
        ("m4_hourly", "H", "short", 48),
        ("m4_yearly", "A-DEC", "short", 6),
        ("m4_quarterly", "Q-DEC", "short", 8),
        ("m4_monthly", "M", "short", 18),
        ("m4_weekly", "W-SUN", "short", 13),
        ("m4_daily", "D", "short", 14),
        ("electricity/15T", "15T", "short", 48),
        ("electricity/15T", "15T", "medium", 480),
        ("electricity/15T", "15T", "long", 720),
        ("solar/10T", "10T", "long", 720),
        ("bizitobs_application", "10S", "short", 60),
        ("bizitobs_application", "10S", "long", 900),
        ("us_births/M", "M", "short", 12),
        ("us_births/W", "W-SUN", "short", 8),
        ("hierarchical_sales/W", "W-WED", "short", 8),
        ("us_births/D", "D", "short", 30),
        ("ett1/H", "H", "medium", 480),
        ("ett1/H", "h", "long", 720),
        # our additions: non-M4 yearly/quarterly, business days, competition horizons
        ("some_yearly", "A-DEC", "short", 6),
        ("some_quarterly", "Q-DEC", "medium", 80),
        ("stocks", "B", "short", 30),
        ("m3_yearly", "A-DEC", "short", 6),
        ("m3_quarterly", "Q-DEC", "short", 8),
        ("m3_monthly", "M", "short", 18),
        ("m3_other", "A-DEC", "short", 8),
        ("nn3", "M", "short", 18),
        ("tourism_yearly", "A-DEC", "short", 4),
        ("tourism_quarterly", "Q-DEC", "short", 8),
        ("tourism_monthly", "M", "short", 24),
    ],
)
def test_prediction_length(name: str, freq: str, term: str, expected: int) -> None:
    assert prediction_length(name, freq, term) == expected


def test_prediction_length_without_a_table_entry() -> None:
    with pytest.raises(ValueError, match="no prediction length"):
        base_prediction_length("m4_minutely", "T")  # M4's table has no minutes


@pytest.mark.parametrize(
    ("name", "min_len", "pl", "expected"),
    [
        ("m4_hourly", 10_000, 48, 1),  # M4: always one window
        ("m3_monthly", 10_000, 18, 1),  # competition override: one window
        ("ett1/H", 17_420, 48, 20),  # ceil(0.1 * 17420 / 48) = 37 -> capped at 20
        ("ett1/H", 17_420, 480, 4),  # ceil(3.63)
        ("ett1/H", 17_420, 720, 3),  # ceil(2.42)
        ("x", 480, 48, 1),  # exactly 1
        ("x", 481, 48, 2),  # just above 1 -> ceil to 2
        ("x", 10, 48, 1),  # at least one
        ("x", 9_600, 48, 20),  # exactly 20
    ],
)
def test_num_windows(name: str, min_len: int, pl: int, expected: int) -> None:
    assert num_windows(name, min_len, pl) == expected
    if "m4" not in name and not name.startswith("m3"):
        assert expected == min(max(1, math.ceil(0.1 * min_len / pl)), 20)


def test_the_97_configurations() -> None:
    assert len(SHORT_DATASETS) == 55 and len(MED_LONG_DATASETS) == 21
    assert len(GIFT_EVAL_CONFIGS) == 97 and len(set(GIFT_EVAL_CONFIGS)) == 97
    for entry in [
        ("m4_hourly", "short"),
        ("ett1/H", "long"),
        ("bizitobs_l2c/5T", "medium"),
        ("kdd_cup_2018_with_missing/H", "long"),
        ("car_parts_with_missing", "short"),
    ]:
        assert entry in GIFT_EVAL_CONFIGS
    assert ("m4_hourly", "medium") not in GIFT_EVAL_CONFIGS
    assert sum(t == "short" for _, t in GIFT_EVAL_CONFIGS) == 55


@pytest.mark.parametrize(
    ("name", "term", "freq", "key"),
    [
        ("m4_hourly", "short", "H", "m4_hourly/H/short"),
        ("m4_yearly", "short", "A-DEC", "m4_yearly/A/short"),
        ("ett1/15T", "long", "15T", "ett1/15T/long"),
        ("LOOP_SEATTLE/5T", "medium", "5T", "loop_seattle/5T/medium"),
        ("saugeenday/D", "short", "D", "saugeen/D/short"),
        ("kdd_cup_2018_with_missing/H", "long", "H", "kdd_cup_2018/H/long"),
        ("car_parts_with_missing", "short", "MS", "car_parts/M/short"),
        ("bizitobs_application", "short", "10S", "bizitobs_application/10S/short"),
        ("m3_yearly", "short", "A-DEC", "m3_yearly/A/short"),
        ("ili", "short", "W-SUN", "ili/W/short"),
    ],
)
def test_config_key(name: str, term: str, freq: str, key: str) -> None:
    assert config_key(name, term, freq) == key


def test_to_univariate_names_variates() -> None:
    entry = {"item_id": "x", "start": pd.Timestamp("2020"), "freq": "H", "target": np.zeros((3, 4), np.float32)}
    out = list(to_univariate([entry, {**entry, "item_id": "u", "target": np.zeros(4, np.float32)}]))
    assert [e["item_id"] for e in out] == ["x_dim0", "x_dim1", "x_dim2", "u"]
    assert all(e["target"].shape == (4,) for e in out)


def test_test_instances_follow_the_windows(tmp_path: Path) -> None:
    pytest.importorskip("gluonts")
    _write(tmp_path, "toy/H", "H", [1000, 2000])  # min length 1000 -> short: pl 48, windows ceil(100/48) = 3
    ds = GiftEvalDataset("toy/H", "short", root=tmp_path)
    assert (ds.prediction_length, ds.windows, ds.min_series_length, ds.num_series) == (48, 3, 1000, 2)
    pairs = list(ds.test_data)
    assert len(pairs) == 2 * 3
    for k, (inp, label) in enumerate(pairs):
        item, w = divmod(k, 3)
        n = (1000, 2000)[item]
        cut = n - 48 * (3 - w)
        np.testing.assert_array_equal(inp["target"], np.arange(cut, dtype=np.float32) + 1000 * item)
        np.testing.assert_array_equal(label["target"], np.arange(cut, cut + 48, dtype=np.float32) + 1000 * item)
        assert inp["start"] == pd.Period("2000-01-01 00:00", freq="h")
    # validation ends where the test windows start; training one prediction length earlier
    assert [len(e["target"]) for e in ds.validation_dataset] == [1000 - 144, 2000 - 144]
    assert [len(e["target"]) for e in ds.training_dataset] == [1000 - 192, 2000 - 192]
    # the windows before the test span: as many, as long, ending where the first test window begins
    before = list(ds.windows_before_test)
    assert len(before) == 2 * 3
    for k, (inp, label) in enumerate(before):
        item, w = divmod(k, 3)
        cut = (1000, 2000)[item] - 48 * (6 - w)
        assert len(inp["target"]) == cut and len(label["target"]) == 48
    assert len(before[2][1]["target"]) + len(before[2][0]["target"]) == len(pairs[0][0]["target"])
    # a span further back: a second set of windows no test window scores, ending where the first set begins
    earlier = list(ds.rolling_windows(spans_back=3))
    assert [len(inp["target"]) for inp, _ in earlier] == [n - 48 * (9 - w) for n in (1000, 2000) for w in range(3)]
    assert len(earlier[2][1]["target"]) + len(earlier[2][0]["target"]) == len(before[0][0]["target"])
    with pytest.raises(ValueError, match="spans_back must be at least 1"):
        ds.rolling_windows(spans_back=0)


def test_multivariate_per_variate(tmp_path: Path) -> None:
    pytest.importorskip("gluonts")
    _write(tmp_path, "mv/15T", "15T", [600], variates=3)
    ds = GiftEvalDataset.per_variate("mv/15T", "short", root=tmp_path)
    assert ds.to_univariate and ds.target_dim == 3 and ds.min_series_length == 600
    ids = [inp["item_id"] for inp, _ in ds.test_data]
    assert ids == ["item0_dim0", "item0_dim0", "item0_dim1", "item0_dim1", "item0_dim2", "item0_dim2"]
    assert ds.config_key == "mv/15T/short"


def test_series_shorter_than_its_horizon(tmp_path: Path) -> None:
    _write(tmp_path, "m4_hourly", "H", [500, 40])  # M4: pl 48, 1 window; item1 has 40 < 48 steps
    ds = GiftEvalDataset("m4_hourly", "short", root=tmp_path)
    with pytest.raises(SeriesTooShortError, match=r"'item1' has 40 steps.*its last 48 \(prediction_length 48, 1 test"):
        ds.check_horizon()
    with pytest.raises(SeriesTooShortError):
        _ = ds.test_data
    with pytest.raises(SeriesTooShortError, match=r"its last 96 .*2 windows in all"):
        _ = GiftEvalDataset("m4_hourly", "short", root=tmp_path).windows_before_test
    _write(tmp_path, "exact", "H", [48])  # no history before the only window
    with pytest.raises(SeriesTooShortError):
        GiftEvalDataset("exact", Term.SHORT, root=tmp_path).check_horizon()


def test_configurations_of_a_gift_eval_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, "m4_hourly", "H", [100])
    monkeypatch.setenv("GIFT_EVAL", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="missing for 96 configurations"):
        configurations()
    assert configurations(skip_missing=True) == [("m4_hourly", "short")]
