"""Forecast timestamps of a request: the ISO strings of the steps after each series that gives ``start`` and ``freq``.

The stepping itself is the core's (``tsfm.df_utils.future_timestamps``, what ``predict_df`` writes), called once per
(frequency, time zone) over the distinct series ends, so a thousand series that share a start cost one date range.
What this module adds is what a request needs and a DataFrame does not:

- a cost cap: pandas steps calendar frequencies (business hours, months, weeks) one timestamp at a time, about
  20 us each, so ``distinct ends x horizon`` of them is counted first and refused past ``max_calendar_timestamps``
  (fixed-length frequencies such as ``h`` are vectorised and not counted);
- deliberate answers at the edges: a ``start`` off its frequency's grid is taken at the next grid point (as
  ``pd.date_range`` does) with a warning; timestamps that would pass year 9999 are left out with a warning, the
  forecast itself being valid. Stamps are kept in microseconds, so any year from 1 to 9999 works (pandas'
  nanoseconds end in 2262).

Blocking and CPU-bound: the app calls it off the event loop, inside the request's timeout. It knows nothing of HTTP.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pandas as pd

from tsfm.df_utils import future_timestamps, parse_freq

MAX_YEAR = 9999  # ISO 8601's four-digit years, and Python's datetime
UNIT = "us"
SHOWN = 5  # series named in one warning


class TimestampsTooCostly(ValueError):
    """The request's calendar timestamps would take longer to build than ``max_calendar_timestamps`` allows."""


@dataclass(frozen=True)
class TimeAxis:
    """What a series says about its time: the first value's time, its frequency alias, its number of values."""

    start: datetime | None
    freq: str | None
    length: int


@dataclass
class Timestamps:
    """One entry per series: its forecast's ISO timestamps, or ``None`` (no start and freq, or past year 9999)."""

    per_series: list[list[str] | None]
    warnings: list[str] = field(default_factory=list)


def calendar_cost(axes: Sequence[TimeAxis], horizon: int) -> int:
    """Timestamps pandas would step through one by one: distinct (start, freq, length) of calendar freqs x horizon."""
    distinct = {(a.start, a.freq, a.length) for a in axes if a.start is not None and a.freq is not None
                and not isinstance(parse_freq(a.freq), pd.offsets.Tick)}
    return len(distinct) * horizon


def check_calendar_cost(axes: Sequence[TimeAxis], horizon: int, max_calendar_timestamps: int) -> None:
    """Refuse, before any work, timestamps that would take longer to build than the limit allows.

    Raises:
        TimestampsTooCostly: ``calendar_cost`` is over ``max_calendar_timestamps``.
    """
    cost = calendar_cost(axes, horizon)
    if cost > max_calendar_timestamps:
        raise TimestampsTooCostly(
            f"the forecast timestamps need {cost} calendar steps (distinct series ends x prediction_length "
            f"{horizon}), over the limit of {max_calendar_timestamps} (max_calendar_timestamps); share start "
            "dates between series, shorten the horizon, or leave out start and freq"
        )


def build_timestamps(axes: Sequence[TimeAxis], horizon: int, *, max_calendar_timestamps: int) -> Timestamps:
    """The forecast timestamps of every series (see the module docstring).

    Raises:
        TimestampsTooCostly: ``calendar_cost`` is over ``max_calendar_timestamps``; nothing was built.
    """
    check_calendar_cost(axes, horizon, max_calendar_timestamps)
    result = Timestamps([None] * len(axes))
    groups: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
    for i, axis in enumerate(axes):
        if axis.start is not None and axis.freq is not None:
            groups[(axis.freq, _zone(axis.start))].append(i)
    rolled: list[tuple[int, pd.Timestamp, pd.Timestamp]] = []
    too_late: list[int] = []
    for (freq, _), members in groups.items():
        offset = parse_freq(freq)
        ends: dict[int, pd.Timestamp] = {}
        for i in members:
            end = _series_end(axes[i], offset, rolled, i)
            if end is None:
                too_late.append(i)
            else:
                ends[i] = end
        if ends:
            for i, stamps in _stamps_after(ends, offset, horizon).items():
                if stamps is None:
                    too_late.append(i)
                else:
                    result.per_series[i] = stamps
    if rolled:
        result.warnings.append(_rolled_warning(rolled))
    if too_late:
        result.warnings.append(
            f"{_names(sorted(too_late))}: the forecast's timestamps would pass the year {MAX_YEAR}, so they are "
            "left out; the forecast values are unaffected"
        )
    return result


def series_ends(axes: Sequence[TimeAxis]) -> tuple[list[pd.Timestamp | None], list[str]]:
    """Each series' last observation time (``None`` without start and freq, or past year 9999), and the warning
    for starts off their frequency's grid, as ``build_timestamps`` gives it (a stream keeps its series' ends)."""
    ends: list[pd.Timestamp | None] = []
    rolled: list[tuple[int, pd.Timestamp, pd.Timestamp]] = []
    for i, axis in enumerate(axes):
        known = axis.start is not None and axis.freq is not None
        ends.append(_series_end(axis, parse_freq(axis.freq), rolled, i) if known else None)
    return ends, [_rolled_warning(rolled)] if rolled else []


def _rolled_warning(rolled: Sequence[tuple[int, pd.Timestamp, pd.Timestamp]]) -> str:
    i, given, first = rolled[0]
    return (f"{_names(sorted(r[0] for r in rolled))}: start is not on the freq grid, so the first value is taken at "
            f"the next grid point (e.g. inputs[{i}]: {given.isoformat()} -> {first.isoformat()})")


def _zone(start: datetime) -> str:
    """Series are stepped together only within one time zone (an index holds one)."""
    return "" if start.tzinfo is None else str(start.utcoffset())


def _series_end(
    axis: TimeAxis, offset: pd.offsets.BaseOffset, rolled: list[tuple[int, pd.Timestamp, pd.Timestamp]], index: int
) -> pd.Timestamp | None:
    """The last value's time (``start`` rolled onto the grid), or ``None`` past the representable range."""
    try:
        given = pd.Timestamp(axis.start).as_unit(UNIT)
        first = given if offset.is_on_offset(given) else offset.rollforward(given)
        if first != given:
            rolled.append((index, given, first))
        end = first + (axis.length - 1) * offset
    except (OverflowError, ValueError):  # OutOfBoundsDatetime is a ValueError
        return None
    return end if end.year <= MAX_YEAR else None


def _stamps_after(
    ends: dict[int, pd.Timestamp], offset: pd.offsets.BaseOffset, horizon: int
) -> dict[int, list[str] | None]:
    """ISO strings of ``horizon`` steps after each end: one call of the core for the distinct ends, one call per end
    if that fails (an overflow names only its own series). Series with one end share one list."""
    distinct = sorted({_key(end): end for end in ends.values()}.items())
    try:
        index = future_timestamps(_index([end for _, end in distinct]), offset, horizon)
    except (OverflowError, ValueError):
        if len(distinct) == 1:
            return dict.fromkeys(ends)
        out: dict[int, list[str] | None] = {}
        for i, end in ends.items():
            out.update(_stamps_after({i: end}, offset, horizon))
        return out
    rows = dict(zip((value for value, _ in distinct), _iso_rows(index, horizon), strict=True))
    return {i: rows[_key(end)] for i, end in ends.items()}


def _iso_rows(index: pd.DatetimeIndex, horizon: int) -> list[list[str] | None]:
    """``datetime.isoformat`` of every stamp, vectorised by numpy; ``None`` for a row that passes year 9999."""
    local = index.tz_localize(None) if index.tz is not None else index
    values = local.as_unit(UNIT).values.reshape(-1, horizon)
    late = values[:, -1] > np.datetime64(f"{MAX_YEAR}-12-31T23:59:59.999999")
    whole_seconds = not (values.astype(np.int64) % 1_000_000).any()
    text = np.datetime_as_string(values, unit="s" if whole_seconds else "us")
    if index.tz is not None:
        offset = index[0].isoformat()[-6:]  # one fixed UTC offset per group: "+05:00"
        text = np.char.add(text, offset)
    return [None if late[k] else row for k, row in enumerate(text.tolist())]


def _names(indices: Sequence[int]) -> str:
    shown = ", ".join(f"inputs[{i}]" for i in indices[:SHOWN])
    return shown + (f" and {len(indices) - SHOWN} more series" if len(indices) > SHOWN else "")


def _key(end: pd.Timestamp) -> np.datetime64:
    """An end as microseconds since the epoch (``Timestamp.value`` is nanoseconds, which years past 2262 overflow)."""
    return end.as_unit(UNIT).asm8


def _index(ends: list[pd.Timestamp]) -> pd.DatetimeIndex:
    """Ends (one time zone) as an index in microseconds; ``pd.DatetimeIndex(list)`` would insist on nanoseconds."""
    index = pd.DatetimeIndex(np.array([_key(end) for end in ends], dtype=f"datetime64[{UNIT}]"))
    tz = ends[0].tz
    return index if tz is None else index.tz_localize("UTC").tz_convert(tz)
