"""GIFT-Eval dataset folders: round trips, ``datasets`` compatibility, errors, atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tsfm.pipelines.data import gift_format
from tsfm.pipelines.data.frequency import UnknownFrequencyError
from tsfm.pipelines.data.gift_format import (
    DatasetFieldError,
    NotADatasetError,
    is_dataset_dir,
    list_datasets,
    read_dataset,
    read_root,
    write_dataset,
)


def _uni() -> list[dict]:
    rng = np.random.default_rng(0)
    out = []
    for i, n in enumerate((5, 1, 300)):
        target = rng.normal(size=n).astype(np.float32)
        target[::7] = np.nan
        out.append(
            {
                "item_id": f"s{i}",
                "start": pd.Timestamp("2020-01-01 03:00") + pd.Timedelta(hours=i),
                "freq": "H",
                "target": target,
            }
        )
    return out


def _multi() -> list[dict]:
    rng = np.random.default_rng(1)
    return [
        {
            "item_id": "a",
            "start": pd.Timestamp("2016-07-01"),
            "freq": "15T",
            "target": rng.normal(size=(3, 50)).astype(np.float32),
        },
        {
            "item_id": "b",
            "start": pd.Timestamp("2017-01-01 00:15"),
            "freq": "15T",
            "target": np.full((3, 4), np.nan, np.float32),
        },
    ]


def _assert_same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x["item_id"] == y["item_id"]
        assert x["start"] == pd.Timestamp(y["start"])
        assert x["freq"] == y["freq"]
        assert x["target"].dtype == np.float32
        np.testing.assert_array_equal(x["target"], np.asarray(y["target"], np.float32))  # NaN == NaN here


@pytest.mark.parametrize("make", [_uni, _multi], ids=["univariate", "multivariate"])
def test_round_trip(tmp_path: Path, make) -> None:
    entries = make()
    out = write_dataset(tmp_path / "ds", entries)
    assert sorted(p.name for p in out.iterdir()) == ["data-00000-of-00001.arrow", "dataset_info.json", "state.json"]
    _assert_same(read_dataset(out), entries)
    info = json.loads((out / "dataset_info.json").read_text())
    assert info["features"]["target"]["_type"] == "Sequence"


def test_sharded_round_trip(tmp_path: Path) -> None:
    entries = _uni() * 4
    out = write_dataset(tmp_path / "ds", entries, shard_bytes=1500)
    assert len(list(out.glob("data-*.arrow"))) > 1
    _assert_same(read_dataset(out), entries)


@pytest.mark.parametrize("make", [_uni, _multi], ids=["univariate", "multivariate"])
def test_loads_with_hf_datasets(tmp_path: Path, make) -> None:
    datasets = pytest.importorskip("datasets")
    entries = make()
    out = write_dataset(tmp_path / "ds", entries, shard_bytes=1500)
    hf = datasets.load_from_disk(str(out)).with_format("numpy")
    assert len(hf) == len(entries)
    for row, e in zip(hf, entries, strict=True):
        assert row["item_id"] == e["item_id"] and row["freq"] == e["freq"]
        assert pd.Timestamp(row["start"].item()) == e["start"]  # numpy format gives 0-d arrays (GIFT-Eval .item()s)
        np.testing.assert_array_equal(np.array(row["target"].tolist(), dtype=np.float32), e["target"])


def test_list_datasets_finds_name_and_name_freq_folders(tmp_path: Path) -> None:
    write_dataset(tmp_path / "m4_hourly", _uni())
    write_dataset(tmp_path / "ett1" / "15T", _multi())
    (tmp_path / "notes").mkdir()
    assert list_datasets(tmp_path) == ["ett1/15T", "m4_hourly"]
    root = read_root(tmp_path)
    assert list(root) == ["ett1/15T", "m4_hourly"]
    _assert_same(list(root["m4_hourly"]), _uni())
    with pytest.raises(NotADatasetError):
        list_datasets(tmp_path / "notes")


def test_not_a_dataset_folder(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "readme.txt").write_text("hello")
    with pytest.raises(NotADatasetError, match="not a GIFT-Eval dataset folder"):
        read_dataset(tmp_path / "x")
    with pytest.raises(NotADatasetError, match="not a folder"):
        read_dataset(tmp_path / "missing")
    # right file names, wrong content
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    (bad / "dataset_info.json").write_text("{}")
    (bad / "data-00000-of-00001.arrow").write_bytes(b"not arrow")
    with pytest.raises(NotADatasetError, match="Arrow IPC stream"):
        read_dataset(bad)


def _write_raw_table(path: Path, table: pa.Table) -> Path:
    """A folder in save_to_disk layout holding an arbitrary table (to test the reader's type checks)."""
    path.mkdir()
    with pa.OSFile(str(path / "data-00000-of-00001.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    (path / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    (path / "dataset_info.json").write_text("{}")
    return path


@pytest.mark.parametrize(
    ("column", "array", "message"),
    [
        ("target", pa.array([["1", "2"]]), "'target' has type list<item: string>"),
        ("target", pa.array([1.0]), "'target' has type double"),
        ("item_id", pa.array([7]), "'item_id' has type int64"),
        ("start", pa.array(["2020-01-01"]), "'start' has type string"),
    ],
)
def test_wrong_field_type_is_named(tmp_path: Path, column: str, array: pa.Array, message: str) -> None:
    cols = {
        "item_id": pa.array(["a"]),
        "start": pa.array([np.datetime64("2020-01-01", "s")], pa.timestamp("s")),
        "freq": pa.array(["H"]),
        "target": pa.array([[1.0, 2.0]], pa.list_(pa.float32())),
    }
    cols[column] = array
    path = _write_raw_table(tmp_path / "ds", pa.table(cols))
    with pytest.raises(DatasetFieldError, match=message.replace("(", r"\(").replace("[", r"\[")):
        read_dataset(path)


def test_missing_field(tmp_path: Path) -> None:
    table = pa.table({"item_id": ["a"], "freq": ["H"], "target": pa.array([[1.0]], pa.list_(pa.float32()))})
    with pytest.raises(DatasetFieldError, match=r"missing field\(s\) \['start'\]"):
        read_dataset(_write_raw_table(tmp_path / "ds", table))


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"freq": "fortnightly"}, UnknownFrequencyError, "unknown frequency 'fortnightly'"),
        ({"item_id": 3}, DatasetFieldError, "'item_id' must be a string"),
        ({"target": ["a", "b"]}, DatasetFieldError, "'target' must be numbers"),
        ({"target": np.zeros((2, 2, 2))}, DatasetFieldError, "non-empty"),
        ({"target": []}, DatasetFieldError, "non-empty"),
        ({"start": "not a date"}, DatasetFieldError, "'start' is not a timestamp"),
        ({"extra": 1}, DatasetFieldError, "unexpected \\['extra'\\]"),
        ({"freq": "D"}, DatasetFieldError, "disagree on 'freq'"),
        ({"target": np.zeros((2, 5))}, DatasetFieldError, "mix target layouts"),
    ],
)
def test_bad_entries_write_nothing(tmp_path: Path, change: dict, error: type, message: str) -> None:
    entries = _uni()
    entries[1] = {**entries[1], **change}
    with pytest.raises(error, match=message):
        write_dataset(tmp_path / "ds", entries)
    assert list(tmp_path.iterdir()) == []


def test_failure_mid_write_leaves_nothing_and_keeps_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = write_dataset(tmp_path / "ds", _uni())

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(gift_format, "_table", broken)
    with pytest.raises(OSError, match="disk full"):
        write_dataset(tmp_path / "ds", _multi(), overwrite=True)
    with pytest.raises(OSError, match="disk full"):
        write_dataset(tmp_path / "new", _multi())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no temp folders, no half-written "new"
    assert is_dataset_dir(old)
    _assert_same(read_dataset(old), _uni())


def test_start_may_be_a_period_or_string(tmp_path: Path) -> None:
    entries = [
        {"item_id": "p", "start": pd.Period("2020-03", freq="M"), "freq": "M", "target": [1.0, 2.0]},
        {"item_id": "s", "start": "2020-04-01", "freq": "M", "target": np.array([3.0])},
    ]
    out = read_dataset(write_dataset(tmp_path / "ds", entries))
    assert [e["start"] for e in out] == [pd.Timestamp("2020-03-01"), pd.Timestamp("2020-04-01")]


def test_existing_folder_needs_overwrite(tmp_path: Path) -> None:
    write_dataset(tmp_path / "ds", _uni())
    with pytest.raises(FileExistsError):
        write_dataset(tmp_path / "ds", _multi())
    write_dataset(tmp_path / "ds", _multi(), overwrite=True)
    _assert_same(read_dataset(tmp_path / "ds"), _multi())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
