"""M4 hourly (Mcompetitions/M4-methods): 414 series, train and test files joined into full series.

GIFT-Eval's ``m4_hourly`` is exactly this: each series is the training part followed by its 48 test values, with
M4's dummy start ``1750-01-01 00:00`` and frequency ``H``. The golden check (Seasonal-Naive MASE 1.193210) holds on
this conversion.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ..paths import raw_file
from .base import SourceDataset, make_entry

__all__ = ["M4_START", "m4_hourly"]

M4_START = pd.Timestamp("1750-01-01 00:00")


def _rows(path: os.PathLike[str]) -> dict[str, np.ndarray]:
    frame = pd.read_csv(path, index_col=0, dtype={0: str})
    return {str(k): row.dropna().to_numpy(np.float32) for k, row in frame.iterrows()}


def m4_hourly(shared: str | os.PathLike[str] | None = None) -> SourceDataset:
    """414 hourly series, ``H1`` ... ``H414``, train + test concatenated."""
    train = _rows(raw_file("m4_hourly_train.csv", shared))
    test = _rows(raw_file("m4_hourly_test.csv", shared))
    if train.keys() != test.keys():
        raise ValueError("m4_hourly: train and test files list different series")
    entries = [make_entry(k, M4_START, "H", np.concatenate([train[k], test[k]]), trim=False) for k in train]
    return SourceDataset(
        name="m4_hourly",
        freq="H",
        entries=entries,
        files=("raw:m4_hourly_train.csv", "raw:m4_hourly_test.csv"),
        description="M4 competition, hourly subset (414 series), train + test; dummy start 1750-01-01 as in M4.",
        license="M4 data (Mcompetitions/M4-methods)",
    )
