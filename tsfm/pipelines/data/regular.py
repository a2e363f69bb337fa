"""Put an irregular source on a regular grid: duplicate stamps averaged, gaps filled with NaN.

GIFT-Eval's format stores only ``start``, ``freq`` and the values, so a series must sit on an exact grid before it
is written. Raw sources break that in three ways, each handled here and nowhere else: duplicated stamps (several
readings for one hour: averaged, NaN ignored), missing stamps (a sensor outage: NaN on the grid), and stamps off the
grid (a car park reporting at 07:59:42: snapped down with ``floor=True``, otherwise an error, because silently
snapping a series that should already be regular hides a wrong frequency).

Fixed-length frequencies (``5T``, ``30T``, ``H``, ``D``) use a timestamp grid from the first stamp; calendar
frequencies (``B``, ``W-SUN``, ``M``, ``Q-DEC``, ``A-DEC``) use pandas periods, so any stamp inside a month belongs
to that month, and the written ``start`` is the first period's start time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

from .frequency import to_pandas_freq, to_period_freq

__all__ = ["OffGridError", "is_fixed", "regularise"]


class OffGridError(ValueError):
    """Stamps fall between grid points of a fixed frequency and ``floor`` was not asked for."""


def is_fixed(offset: pd.DateOffset) -> bool:
    """True for grids built from timestamps (ticks, days, business days) rather than periods. Business days stay
    off periods because pandas 3 deprecates ``Period`` with ``B``."""
    return isinstance(offset, (pd.offsets.Tick, pd.offsets.Day, pd.offsets.BusinessDay))


def regularise(
    frame: pd.DataFrame | pd.Series, freq: str, *, floor: bool = False, name: str = "series"
) -> tuple[pd.Timestamp, np.ndarray]:
    """Regularise one series (or one multivariate block) indexed by timestamps.

    Args:
        frame: values indexed by a DatetimeIndex (columns = variates); rows with a missing stamp are dropped.
        freq: the target frequency alias (legacy or current spelling).
        floor: snap stamps down to the frequency's grid (epoch-aligned) before averaging.
        name: used in error messages.

    Returns:
        ``(start, values)``: the grid's first stamp and float32 values ``[T]`` (Series) or ``[V, T]`` (DataFrame).

    Raises:
        OffGridError: a stamp lies off the grid and ``floor`` is False.
        ValueError: no stamp with a value is left.
    """
    is_series = isinstance(frame, pd.Series)
    df = frame.to_frame() if is_series else frame
    df = df[~pd.isna(df.index)]
    if df.empty:
        raise ValueError(f"{name}: no timestamps to regularise")
    index = pd.DatetimeIndex(df.index)
    if index.tz is not None:
        index = index.tz_localize(None)
    df = df.apply(pd.to_numeric, errors="coerce").astype(np.float64)
    offset = to_offset(to_pandas_freq(freq))

    if isinstance(offset, pd.offsets.BusinessDay):
        keys = index.normalize()
        grid = pd.date_range(keys.min(), keys.max(), freq=offset)
        off = ~keys.isin(grid)
        if off.any():
            raise OffGridError(f"{name}: {int(off.sum())} stamps fall on non-business days (first {keys[off][0]})")
        values = df.groupby(keys).mean().reindex(grid)
        start = pd.Timestamp(grid[0])
    elif is_fixed(offset):
        if floor:
            keys = index.floor(offset)
        else:
            origin = index.min()
            step = pd.Timedelta(offset)
            off = (index - origin) % step != pd.Timedelta(0)
            if off.any():
                raise OffGridError(
                    f"{name}: {int(off.sum())} stamps are off the {freq} grid (first {index[off][0]}); "
                    "pass floor=True to snap them"
                )
            keys = index
        grouped = df.groupby(keys).mean()
        grid = pd.date_range(grouped.index.min(), grouped.index.max(), freq=offset)
        values = grouped.reindex(grid)
        start = pd.Timestamp(grid[0])
    else:
        keys = index.to_period(to_period_freq(freq))
        grouped = df.groupby(keys).mean()
        grid = pd.period_range(grouped.index.min(), grouped.index.max(), freq=to_period_freq(freq))
        values = grouped.reindex(grid)
        start = pd.Timestamp(grid[0].start_time)

    arr = values.to_numpy(dtype=np.float32).T  # [V, T]
    return start.floor("s"), (arr[0] if is_series else arr)
