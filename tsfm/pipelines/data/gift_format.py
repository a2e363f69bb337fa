"""GIFT-Eval dataset folders: read and write them with pyarrow alone.

A GIFT-Eval dataset is what Hugging Face ``datasets`` writes with ``save_to_disk``: a folder holding
``data-00000-of-0000N.arrow`` (Arrow IPC *stream* files), ``dataset_info.json`` (the features) and ``state.json``
(the shard list). Its rows have four fields:

- ``item_id``: string;
- ``start``: ``timestamp[s]``, the time of the first value;
- ``freq``: a legacy pandas alias (``H``, ``15T``, ``W-SUN``, ``M``, ``A-DEC``; see :mod:`.frequency`);
- ``target``: ``list<float32>`` (univariate) or ``list<list<float32>>`` laid out ``[variates, time]``; NaN marks a
  missing value.

Reading needs no ``datasets`` import (it is slow to import and pins its own pyarrow/fsspec ranges), and it streams
record batches from memory-mapped files, so a corpus larger than memory can be iterated. Writing records the
features in the old ``Sequence`` form, which ``datasets`` 2.17 requires and ``datasets`` >= 4 still reads (4 writes
``List``, which 2.x cannot read). A write goes to a temporary sibling folder that is renamed into place, so a
reader never sees a half-written dataset.

An *entry* (one series) is a plain dict, as in gluonts and ``datasets``: ``{"item_id": str, "start":
pd.Timestamp, "freq": str, "target": np.ndarray}`` with ``target`` float32 of shape ``[T]`` or ``[V, T]``.
Extra columns in downloaded GIFT-Eval folders (e.g. ``past_feat_dynamic_real``) are passed through on read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .frequency import to_pandas_freq

__all__ = [
    "DatasetFieldError",
    "Entry",
    "GiftFormatError",
    "NotADatasetError",
    "dataset_features",
    "is_dataset_dir",
    "iter_entries",
    "list_datasets",
    "read_dataset",
    "read_root",
    "read_table",
    "write_dataset",
]

Entry = dict[str, Any]
"""One series: ``item_id`` (str), ``start`` (pd.Timestamp), ``freq`` (str), ``target`` (float32 ``[T]``/``[V, T]``)."""

REQUIRED_FIELDS = ("item_id", "start", "freq", "target")
INFO_FILE = "dataset_info.json"
STATE_FILE = "state.json"
DEFAULT_SHARD_BYTES = 500 * 1024 * 1024  # what ``datasets`` uses for save_to_disk


class GiftFormatError(ValueError):
    """Base class: the data does not follow the GIFT-Eval format."""


class NotADatasetError(GiftFormatError, FileNotFoundError):
    """The folder is not a saved dataset (no ``state.json`` / ``dataset_info.json`` / ``.arrow`` shards)."""


class DatasetFieldError(GiftFormatError):
    """A field is missing or has the wrong type (names the field, the type found and the type expected)."""


# ---------------------------------------------------------------------------------------------------------- read


def is_dataset_dir(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` looks like a ``save_to_disk`` folder (state file, info file and at least one shard)."""
    p = Path(path)
    return (p / STATE_FILE).is_file() and (p / INFO_FILE).is_file() and any(p.glob("data-*.arrow"))


def _shard_paths(path: Path) -> list[Path]:
    if not path.is_dir():
        raise NotADatasetError(f"{path} is not a folder (expected a GIFT-Eval dataset folder)")
    if not is_dataset_dir(path):
        found = sorted(q.name for q in path.iterdir())[:10]
        raise NotADatasetError(
            f"{path} is not a GIFT-Eval dataset folder: expected {STATE_FILE}, {INFO_FILE} and data-*.arrow "
            f"(found {found or 'nothing'})"
        )
    try:
        state = json.loads((path / STATE_FILE).read_text())
        names = [f["filename"] for f in state["_data_files"]]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise NotADatasetError(f"{path / STATE_FILE} is not a datasets state file ({err})") from err
    shards = [path / n for n in names]
    missing = [s.name for s in shards if not s.is_file()]
    if missing:
        raise NotADatasetError(f"{path}: shards listed in {STATE_FILE} are missing: {missing}")
    return shards


def _is_float_list(t: pa.DataType) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_floating(t.value_type)


def _target_ndim(t: pa.DataType) -> int | None:
    if _is_float_list(t):
        return 1
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and _is_float_list(t.value_type):
        return 2
    return None


def _check_schema(schema: pa.Schema, where: Path) -> int:
    """Check the four fields; returns the target's ndim (1 or 2)."""
    missing = [f for f in REQUIRED_FIELDS if f not in schema.names]
    if missing:
        raise DatasetFieldError(f"{where}: missing field(s) {missing}; fields present: {schema.names}")
    expected = {
        "item_id": (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "string"),
        "start": (pa.types.is_timestamp, "timestamp[s]"),
        "freq": (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "string"),
    }
    for name, (ok, want) in expected.items():
        t = schema.field(name).type
        if not ok(t):
            raise DatasetFieldError(f"{where}: field {name!r} has type {t}, expected {want}")
    t = schema.field("target").type
    ndim = _target_ndim(t)
    if ndim is None:
        raise DatasetFieldError(
            f"{where}: field 'target' has type {t}, expected list<float32> or list<list<float32>> ([variates, time])"
        )
    return ndim


def _list_to_arrays(col: pa.Array) -> list[np.ndarray]:
    """``list<float>`` -> one float32 array per row (nulls become NaN), without a Python loop over values."""
    offsets = col.offsets.to_numpy()
    offsets = offsets - offsets[0]
    values = pc.fill_null(col.flatten(), np.nan).cast(pa.float32()).to_numpy(zero_copy_only=False)
    values = np.array(values, dtype=np.float32, copy=True)  # own writable buffer (not the mmap)
    return np.split(values, offsets[1:-1]) if len(col) else []


def _nested_to_arrays(col: pa.Array, where: Path, first_row: int) -> list[np.ndarray]:
    """``list<list<float>>`` -> one ``[V, T]`` float32 array per row; all variates of a row must share a length."""
    outer = col.offsets.to_numpy()
    outer = outer - outer[0]
    inner_col = col.flatten()
    rows = _list_to_arrays(inner_col)
    out = []
    for i in range(len(col)):
        variates = rows[outer[i] : outer[i + 1]]
        lengths = {len(v) for v in variates}
        if len(lengths) > 1:
            raise DatasetFieldError(f"{where}: row {first_row + i} has variates of different lengths {sorted(lengths)}")
        out.append(np.stack(variates) if variates else np.zeros((0, 0), np.float32))
    return out


def _batch_entries(batch: pa.RecordBatch, ndim: int, where: Path, first_row: int) -> Iterator[Entry]:
    item_ids = batch.column("item_id").to_pylist()
    starts = batch.column("start")
    if starts.type.tz is not None:
        starts = pc.local_timestamp(starts)
    starts = starts.cast(pa.timestamp("s")).to_numpy(zero_copy_only=False)
    freqs = batch.column("freq").to_pylist()
    col = batch.column("target")
    targets = _list_to_arrays(col) if ndim == 1 else _nested_to_arrays(col, where, first_row)
    extra = [n for n in batch.schema.names if n not in REQUIRED_FIELDS]
    extra_values = {n: batch.column(n).to_pylist() for n in extra}
    for i in range(batch.num_rows):
        entry: Entry = {
            "item_id": item_ids[i],
            "start": pd.Timestamp(starts[i]),
            "freq": freqs[i],
            "target": targets[i],
        }
        for n in extra:
            v = extra_values[n][i]
            entry[n] = np.asarray(v, dtype=np.float32) if isinstance(v, list) else v
        yield entry


def _open_stream(shard: Path) -> pa.ipc.RecordBatchStreamReader:
    try:
        return pa.ipc.open_stream(pa.memory_map(str(shard), "r"))
    except pa.ArrowInvalid as err:
        raise NotADatasetError(f"{shard} is not an Arrow IPC stream file ({err})") from err


def iter_entries(path: str | os.PathLike[str]) -> Iterator[Entry]:
    """Stream the entries of one dataset folder, batch by batch (memory-mapped; fine for large corpora).

    Raises:
        NotADatasetError: the folder is not a saved dataset.
        DatasetFieldError: a field is missing or of the wrong type.
    """
    p = Path(path)
    row = 0
    for shard in _shard_paths(p):
        reader = _open_stream(shard)
        ndim = _check_schema(reader.schema, shard)
        for batch in reader:
            yield from _batch_entries(batch, ndim, shard, row)
            row += batch.num_rows


def read_table(path: str | os.PathLike[str]) -> pa.Table:
    """All shards of a dataset as one (memory-mapped) Arrow table, schema checked. Cheap column statistics
    (series lengths, counts) come from here without building numpy arrays."""
    p = Path(path)
    tables = []
    for shard in _shard_paths(p):
        reader = _open_stream(shard)
        _check_schema(reader.schema, shard)
        tables.append(reader.read_all())
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def read_dataset(path: str | os.PathLike[str]) -> list[Entry]:
    """All entries of one dataset folder (see :func:`iter_entries`)."""
    return list(iter_entries(path))


def list_datasets(root: str | os.PathLike[str]) -> list[str]:
    """Names of the datasets under a GIFT-Eval root (``$GIFT_EVAL``): ``name`` or ``name/freq`` folders.

    ``["m4_hourly", "ett1/15T", "ett1/H", ...]``, sorted. A root that holds no dataset raises
    :class:`NotADatasetError`.
    """
    r = Path(root)
    if not r.is_dir():
        raise NotADatasetError(f"GIFT-Eval root {r} is not a folder")
    names = []
    for child in sorted(r.iterdir()):
        if not child.is_dir() or child.name.startswith("."):
            continue
        if is_dataset_dir(child):
            names.append(child.name)
            continue
        names.extend(f"{child.name}/{sub.name}" for sub in sorted(child.iterdir()) if is_dataset_dir(sub))
    if not names:
        raise NotADatasetError(f"{r} holds no GIFT-Eval dataset folder (name/ or name/freq/ with data-*.arrow)")
    return names


def read_root(root: str | os.PathLike[str]) -> dict[str, Iterator[Entry]]:
    """Every dataset under a GIFT-Eval root, by name (``"ett1/H"``), each as a lazy entry stream.

    Streams rather than lists: the real GIFT-Eval (and GiftEvalPretrain) roots do not fit in memory at once.
    """
    r = Path(root)
    return {name: iter_entries(r / name) for name in list_datasets(r)}


# --------------------------------------------------------------------------------------------------------- write


def dataset_features(target_ndim: int) -> dict[str, Any]:
    """The ``features`` entry of ``dataset_info.json`` in the ``Sequence`` form that ``datasets`` 2.17 and >= 4 read."""
    value = {"dtype": "float32", "_type": "Value"}
    seq: dict[str, Any] = {"feature": value, "length": -1, "id": None, "_type": "Sequence"}
    if target_ndim == 2:
        seq = {"feature": seq, "length": -1, "id": None, "_type": "Sequence"}
    return {
        "item_id": {"dtype": "string", "_type": "Value"},
        "start": {"dtype": "timestamp[s]", "_type": "Value"},
        "freq": {"dtype": "string", "_type": "Value"},
        "target": seq,
    }


def _check_entry(i: int, entry: Entry) -> tuple[str, np.datetime64, str, np.ndarray]:
    if not isinstance(entry, dict):
        raise DatasetFieldError(f"entry {i}: expected a dict with fields {list(REQUIRED_FIELDS)}, got {type(entry)}")
    missing = [f for f in REQUIRED_FIELDS if f not in entry]
    extra = [f for f in entry if f not in REQUIRED_FIELDS]
    if missing or extra:
        raise DatasetFieldError(
            f"entry {i}: fields must be exactly {list(REQUIRED_FIELDS)}; missing {missing}, unexpected {extra}"
        )
    item_id = entry["item_id"]
    if not isinstance(item_id, str):
        raise DatasetFieldError(f"entry {i}: 'item_id' must be a string, got {type(item_id).__name__} {item_id!r}")
    freq = entry["freq"]
    if not isinstance(freq, str):
        raise DatasetFieldError(f"entry {i} ({item_id}): 'freq' must be a string, got {type(freq).__name__}")
    to_pandas_freq(freq)  # raises UnknownFrequencyError with the alias in the message
    try:
        raw_start = entry["start"]
        start = raw_start.start_time if isinstance(raw_start, pd.Period) else pd.Timestamp(raw_start)
    except (ValueError, TypeError) as err:
        raise DatasetFieldError(f"entry {i} ({item_id}): 'start' is not a timestamp: {entry['start']!r}") from err
    if start is pd.NaT:
        raise DatasetFieldError(f"entry {i} ({item_id}): 'start' is missing (NaT)")
    if start.tzinfo is not None:
        start = start.tz_localize(None)
    target = entry["target"]
    try:
        arr = np.asarray(target, dtype=np.float32)
    except (ValueError, TypeError) as err:
        got = type(target).__name__
        raise DatasetFieldError(f"entry {i} ({item_id}): 'target' must be numbers, got {got}") from err
    if arr.ndim not in (1, 2) or arr.shape[-1] == 0 or (arr.ndim == 2 and arr.shape[0] == 0):
        raise DatasetFieldError(
            f"entry {i} ({item_id}): 'target' must be a non-empty [time] or [variates, time] array, "
            f"got shape {arr.shape}"
        )
    return item_id, start.to_datetime64().astype("datetime64[s]"), freq, arr


def _table(entries: list[tuple[str, np.datetime64, str, np.ndarray]], ndim: int) -> pa.Table:
    item_ids = pa.array([e[0] for e in entries], pa.string())
    starts = pa.array(np.array([e[1] for e in entries], dtype="datetime64[s]"), pa.timestamp("s"))
    freqs = pa.array([e[2] for e in entries], pa.string())
    arrays = [e[3] for e in entries]
    if ndim == 1:
        lengths = np.array([len(a) for a in arrays], dtype=np.int64)
        values = pa.array(np.concatenate(arrays) if arrays else np.zeros(0, np.float32), pa.float32())
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32), pa.int32())
        target = pa.ListArray.from_arrays(offsets, values, type=pa.list_(pa.float32()))
    else:
        rows = [v for a in arrays for v in a]  # variates in order, row after row
        inner_lengths = np.array([len(v) for v in rows], dtype=np.int64)
        values = pa.array(np.concatenate(rows) if rows else np.zeros(0, np.float32), pa.float32())
        inner_offsets = pa.array(np.concatenate([[0], np.cumsum(inner_lengths)]).astype(np.int32), pa.int32())
        inner = pa.ListArray.from_arrays(inner_offsets, values, type=pa.list_(pa.float32()))
        outer_offsets = np.concatenate([[0], np.cumsum([a.shape[0] for a in arrays])]).astype(np.int32)
        target = pa.ListArray.from_arrays(
            pa.array(outer_offsets, pa.int32()), inner, type=pa.list_(pa.list_(pa.float32()))
        )
    metadata = {b"huggingface": json.dumps({"info": {"features": dataset_features(ndim)}}).encode()}
    schema = pa.schema(
        [("item_id", pa.string()), ("start", pa.timestamp("s")), ("freq", pa.string()), ("target", target.type)],
        metadata=metadata,
    )
    return pa.Table.from_arrays([item_ids, starts, freqs, target], schema=schema)


def _shard_bounds(entries: list[tuple[str, np.datetime64, str, np.ndarray]], shard_bytes: int) -> list[tuple[int, int]]:
    bounds, lo, size = [], 0, 0
    for i, e in enumerate(entries):
        size += e[3].nbytes + 64
        if size > shard_bytes and i + 1 > lo:
            bounds.append((lo, i + 1))
            lo, size = i + 1, 0
    if lo < len(entries) or not bounds:
        bounds.append((lo, len(entries)))
    return bounds


def write_dataset(
    path: str | os.PathLike[str],
    entries: Iterable[Entry],
    *,
    overwrite: bool = False,
    description: str = "",
    license: str = "",
    homepage: str = "",
    shard_bytes: int = DEFAULT_SHARD_BYTES,
) -> Path:
    """Write entries as a GIFT-Eval dataset folder; all-or-nothing.

    All entries must share one ``freq`` and one target layout (all ``[T]``, or all ``[V, T]`` with the same ``V``).
    The folder appears only once complete: files go to a hidden temporary sibling that is renamed into place (an
    existing folder is replaced only with ``overwrite=True``, and only after the new one is complete).

    Args:
        path: the dataset folder to create (``<root>/m4_hourly`` or ``<root>/ett1/H``).
        entries: dicts with exactly ``item_id``, ``start``, ``freq``, ``target``.
        overwrite: replace an existing folder.
        description, license, homepage: recorded in ``dataset_info.json`` (say where the data came from).
        shard_bytes: target size of one ``.arrow`` shard.

    Returns:
        The folder written.

    Raises:
        DatasetFieldError: an entry has a missing, extra or mistyped field, or entries disagree on freq/layout.
        UnknownFrequencyError: ``freq`` is not a pandas alias.
        FileExistsError: the folder exists and ``overwrite`` is False.
    """
    out = Path(path)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; pass overwrite=True to replace it")
    checked = [_check_entry(i, e) for i, e in enumerate(entries)]
    if not checked:
        raise DatasetFieldError(f"{out}: no entries to write")
    freqs = {c[2] for c in checked}
    if len(freqs) > 1:
        raise DatasetFieldError(f"{out}: entries disagree on 'freq' {sorted(freqs)}; a dataset has one frequency")
    layouts = {c[3].shape[:-1] for c in checked}
    if len(layouts) > 1:
        raise DatasetFieldError(
            f"{out}: entries mix target layouts {sorted(layouts)} (univariate [T] vs [V, T], or different V)"
        )
    ndim = checked[0][3].ndim

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        bounds = _shard_bounds(checked, shard_bytes)
        digest = hashlib.sha256()
        names = []
        for k, (lo, hi) in enumerate(bounds):
            table = _table(checked[lo:hi], ndim)
            name = f"data-{k:05d}-of-{len(bounds):05d}.arrow"
            with pa.OSFile(str(tmp / name), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            digest.update((tmp / name).read_bytes())
            names.append(name)
        info = {
            "citation": "",
            "description": description,
            "features": dataset_features(ndim),
            "homepage": homepage,
            "license": license,
        }
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")
        state = {
            "_data_files": [{"filename": n} for n in names],
            "_fingerprint": digest.hexdigest()[:16],
            "_format_columns": None,
            "_format_kwargs": {},
            "_format_type": None,
            "_output_all_columns": False,
            "_split": None,
        }
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")
        if out.exists():
            old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
