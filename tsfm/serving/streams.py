"""The service's open streams (issue 15 item 3): ``StreamStore`` keeps :class:`tsfm.stream.Stream` objects between
requests, with their ids, series ids and time axes, their idle expiry, the caps on their number and memory, and
(optionally) their snapshots on disk.

Who runs what (the app's routes drive it; see ``tsfm.serving.app``):

* **Event loop**: the bookkeeping only (the dict of entries, caps, expiry, one ``asyncio.Lock`` per stream). An
  update or forecast of a stream holds that stream's lock from before its checks until its answer is decided, so
  the updates of one stream are serialised and applied in arrival order; different streams proceed independently.
* **Model thread** (the one the batcher uses, a one-thread executor): ``open_stream``, ``update``, ``forecast``
  (the model work: prefill, patches read into the state, decoding). Nothing of it runs on the event loop.
* **Parse thread**: the timestamp checks of an update (pandas) and the snapshot writes (file I/O, fsync).

Snapshots (``stream_dir``): one safetensors file per stream, ``<stream_id>.safetensors``: the stream's own
``state_dict`` plus a ``service.meta`` entry (item ids, frequencies, last timestamps). Every acknowledged update is
written to a temporary file in the same folder, flushed and fsynced, then moved over the old one with ``os.replace``
(atomic on POSIX), before the route answers 2xx; an update whose snapshot cannot be written is undone in memory and
answered 500, so memory and disk agree on what was acknowledged. ``load_snapshots`` reads them back at start-up.
Stream ids are ``secrets.token_urlsafe(24)``, and every id is matched against ``STREAM_ID_PATTERN`` before a path is
built from it (no path traversal through an id).

Memory (``max_stream_bytes``): a stream counts its carried state tensors (per series: the backbone's state, the last
hidden vector, loc and scale) plus its kept tail at its bound (``context_length`` float32 values per series, which
it may grow to). Counted at the bound, the figure is known before any model work and never grows, so an update
never fails on memory.

Expiry (``stream_idle_s``): a stream idle that long is removed (with its snapshot) when next touched (lazily) and by
the app's periodic ``sweep``; a stream whose lock is held (a request is using it) never expires. Streams reloaded at
start-up get a fresh idle period. This module knows nothing of HTTP: errors are exceptions the app maps to statuses.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch.utils import _pytree as pytree

from tsfm.df_utils import parse_freq
from tsfm.serving.schemas import STREAM_ID_PATTERN
from tsfm.serving.timestamps import MAX_YEAR, UNIT, TimeAxis
from tsfm.stream import DEFAULT_MAX_DRIFT, Stream

log = logging.getLogger("tsfm.serving")

SNAPSHOT_SUFFIX = ".safetensors"
META_KEY = "service.meta"
SNAPSHOT_FORMAT = 1
_ID = re.compile(STREAM_ID_PATTERN.removeprefix("^").removesuffix("$"))


class StreamNotFound(LookupError):
    """No open stream has this id (never opened, deleted, or expired)."""


class StreamsFull(RuntimeError):
    """A cap would be passed: ``status`` is 429 (``max_streams``), 507 (``max_stream_bytes`` with the others) or 413
    (one stream larger than ``max_stream_bytes``)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class StreamInputError(ValueError):
    """The request does not fit the stream (series count, timestamps): ``errors`` are FastAPI-shaped dicts."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors)
        self.errors = errors


def check_stream_id(stream_id: str) -> str:
    """``stream_id`` if it has the shape of an id this service makes; ``ValueError`` otherwise."""
    if not isinstance(stream_id, str) or not _ID.fullmatch(stream_id):
        raise ValueError(f"not a stream id: {str(stream_id)[:40]!r}")
    return stream_id


@dataclass(eq=False)
class StreamEntry:
    """One open stream and what the service knows about its series."""

    stream_id: str
    series: int
    nbytes: int
    last_used: float
    model: str = ""
    item_ids: list[str | int] = field(default_factory=list)
    freqs: list[str | None] = field(default_factory=list)
    ends: list[pd.Timestamp | None] = field(default_factory=list)  # time of each series' last observation
    notes: list[str] = field(default_factory=list)  # warnings repeated with every forecast
    stream: Stream | None = None  # None while it is being opened
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closed: bool = False

    def axes(self) -> list[TimeAxis]:
        """Time axes whose single value is each series' last observation: forecast timestamps continue from it."""
        return [TimeAxis(end, freq, 1) if end is not None else TimeAxis(None, None, 0)
                for end, freq in zip(self.ends, self.freqs, strict=True)]


@dataclass
class UpdateResult:
    steps: list[int]
    buffered: list[int]
    patches_completed: list[int]
    reanchors: list[int]
    backup: dict[str, torch.Tensor]  # the stream before the update, to undo it if its snapshot cannot be written
    snapshot: dict[str, torch.Tensor] | None  # the stream after it, to write (None without stream_dir)


class StreamStore:
    """Open streams of one app (see the module docstring).

    Args:
        idle_s: seconds without a request after which a stream is removed.
        max_streams: open streams at most.
        max_stream_bytes: memory of all streams at most (state tensors + kept tails at their bound).
        directory: snapshot folder (created if missing), or ``None`` for memory only.
        clock: monotonic seconds (tests pass one they can advance).
        on_expired: called with the number of streams each expiry removed (metrics).
    """

    def __init__(
        self,
        *,
        idle_s: float,
        max_streams: int,
        max_stream_bytes: int,
        directory: str | os.PathLike[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_expired: Callable[[int], None] | None = None,
    ) -> None:
        self.idle_s = float(idle_s)
        self.max_streams = max_streams
        self.max_stream_bytes = max_stream_bytes
        self.directory = None if directory is None else Path(directory)
        self.clock = clock
        self.entries: dict[str, StreamEntry] = {}
        self.on_expired = on_expired
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)

    # -------------------------------------------------------------------------------------------- bookkeeping
    @property
    def total_bytes(self) -> int:
        return sum(entry.nbytes for entry in self.entries.values())

    def expires_in(self, entry: StreamEntry) -> float:
        return max(0.0, round(entry.last_used + self.idle_s - self.clock(), 3))

    def reserve(self, series: int, bytes_per_series: int) -> StreamEntry:
        """A new entry counted against the caps (its stream is opened next, under its lock).

        Raises:
            StreamsFull: ``max_streams`` or ``max_stream_bytes`` would be passed.
        """
        self.sweep()
        nbytes = series * bytes_per_series
        if nbytes > self.max_stream_bytes:
            raise StreamsFull(
                f"a stream of {series} series takes {nbytes} bytes, more than the {self.max_stream_bytes} bytes all "
                "streams may hold (max_stream_bytes); open it as several streams of fewer series", 413
            )
        if len(self.entries) >= self.max_streams:
            raise StreamsFull(
                f"{len(self.entries)} streams are open, the limit (max_streams); close streams you no longer need "
                "(DELETE /v1/streams/{stream_id}) or retry once idle ones expire", 429
            )
        total = self.total_bytes
        if total + nbytes > self.max_stream_bytes:
            raise StreamsFull(
                f"open streams hold {total} bytes; this one ({series} series) needs {nbytes} more, past the "
                f"{self.max_stream_bytes} bytes all streams may hold (max_stream_bytes); close streams you no longer "
                "need or retry once idle ones expire", 507
            )
        stream_id = secrets.token_urlsafe(24)
        while stream_id in self.entries:  # 192 random bits: never, but cheap to rule out
            stream_id = secrets.token_urlsafe(24)
        entry = StreamEntry(check_stream_id(stream_id), series, nbytes, self.clock())
        self.entries[stream_id] = entry
        return entry

    def get(self, stream_id: str) -> StreamEntry:
        """The open stream with this id (its idle time restarts).

        Raises:
            StreamNotFound: no such stream, or it expired.
        """
        entry = self.entries.get(check_stream_id(stream_id))
        if entry is None or entry.stream is None:
            raise StreamNotFound(f"no open stream {stream_id!r}: never opened, deleted, or idle for longer than "
                                 f"{self.idle_s:g} s (stream_idle_s)")
        if self._is_expired(entry):
            self.remove(entry)
            self._expired(1)
            raise StreamNotFound(f"stream {stream_id!r} expired: idle for longer than {self.idle_s:g} s "
                                 "(stream_idle_s)")
        entry.last_used = self.clock()
        return entry

    def remove(self, entry: StreamEntry) -> None:
        """Forget the stream and delete its snapshot."""
        entry.closed = True
        if self.entries.get(entry.stream_id) is entry:
            del self.entries[entry.stream_id]
        path = self.snapshot_path(entry.stream_id)
        if path is not None:
            try:
                path.unlink(missing_ok=True)
            except OSError as err:  # the stream is gone from memory; a stale file is reloaded, then expires again
                log.warning("could not delete the snapshot of stream %s: %s", entry.stream_id, err)

    def sweep(self) -> int:
        """Remove every expired stream not in use; the number removed."""
        expired = [entry for entry in self.entries.values() if entry.stream is not None and self._is_expired(entry)]
        for entry in expired:
            self.remove(entry)
        if expired:
            self._expired(len(expired))
        return len(expired)

    def _expired(self, count: int) -> None:
        if self.on_expired is not None:
            self.on_expired(count)

    def _is_expired(self, entry: StreamEntry) -> bool:
        return not entry.lock.locked() and self.clock() - entry.last_used > self.idle_s

    # ------------------------------------------------------------------------------------- on the model thread
    @staticmethod
    def bytes_per_series(model: Any, context_length: int) -> int:
        """State tensors (backbone state, last hidden vector, loc, scale) and kept tail of one series, in bytes."""
        config = model.config
        tail = context_length * 4
        if model.streams_recompute:  # keeps no state: recomputed from the tail
            return tail + 8
        state = model.backbone.init_state(1, device="cpu", dtype=torch.float32)
        leaves = sum(leaf.numel() * leaf.element_size() for leaf in pytree.tree_leaves(state))
        return int(leaves + config.d_model * 4 + 8 + tail)

    @staticmethod
    def open_stream(model: Any, entry: StreamEntry, arrays: Sequence[np.ndarray],
                    max_drift: float | None = DEFAULT_MAX_DRIFT) -> None:
        """Prefill the stream (model thread)."""
        entry.stream = Stream(model, list(arrays), max_drift=max_drift)

    @staticmethod
    def update(entry: StreamEntry, values: Sequence[np.ndarray], keep_snapshot: bool) -> UpdateResult:
        """Append the new values (model thread); the result holds what is needed to persist or undo it."""
        stream = entry.stream
        assert stream is not None
        backup = {name: tensor.clone() for name, tensor in stream.state_dict().items()}
        before = stream.buffered
        patch = stream.config.patch_size
        try:
            stream.update([np.asarray(v, dtype=np.float64) for v in values])
        except BaseException:
            entry.stream = Stream.from_state_dict(stream.model, backup)
            raise
        steps = [len(v) for v in values]
        return UpdateResult(
            steps=steps,
            buffered=stream.buffered,
            patches_completed=[(b + n) // patch for b, n in zip(before, steps, strict=True)],
            reanchors=list(stream.reanchors),
            backup=backup,
            snapshot=stream.state_dict() if keep_snapshot else None,
        )

    @staticmethod
    def undo(entry: StreamEntry, backup: dict[str, torch.Tensor]) -> None:
        """Put the stream back as it was before an update whose snapshot failed (model thread)."""
        assert entry.stream is not None
        entry.stream = Stream.from_state_dict(entry.stream.model, backup)

    @staticmethod
    def forecast(entry: StreamEntry, horizon: int, levels: Sequence[float], infer_nonnegative: bool | None = None,
                 naive_blend: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(quantiles [N, H, Q], median [N, H])`` as float32, like ``predict`` (model thread)."""
        assert entry.stream is not None
        quantiles, median = entry.stream.forecast(horizon, list(levels), infer_nonnegative, naive_blend)
        return quantiles.astype(np.float32), median.astype(np.float32)

    # --------------------------------------------------------------------------------------- snapshots on disk
    def snapshot_path(self, stream_id: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / f"{check_stream_id(stream_id)}{SNAPSHOT_SUFFIX}"

    def write_snapshot(self, entry: StreamEntry, tensors: dict[str, torch.Tensor], ends: list[Any]) -> None:
        """Write the stream's snapshot atomically: a temporary file, fsynced, moved over the old one (parse thread).

        ``ends`` are the series' last timestamps after the update (the entry's own are set once this succeeds)."""
        from safetensors.torch import save

        path = self.snapshot_path(entry.stream_id)
        if path is None:
            return
        meta = {
            "format": SNAPSHOT_FORMAT,
            "stream_id": entry.stream_id,
            "model": entry.model,
            "item_ids": entry.item_ids,
            "freqs": entry.freqs,
            "ends": [None if end is None else end.isoformat() for end in ends],
            "notes": entry.notes,
        }
        blob = json.dumps(meta).encode()
        payload = save({**tensors, META_KEY: torch.frombuffer(bytearray(blob), dtype=torch.uint8).clone()})
        temporary = path.with_name(f".{entry.stream_id}.{secrets.token_hex(4)}.tmp")
        try:
            with open(temporary, "wb") as file:
                file.write(payload)
                file.flush()
                os.fsync(file.fileno())
            if entry.closed:  # deleted or expired meanwhile: do not bring its file back
                return
            os.replace(temporary, path)
            _fsync_folder(path.parent)
        finally:
            temporary.unlink(missing_ok=True)

    def load_snapshots(self, model: Any, model_name: str) -> int:
        """Reload every snapshot of ``stream_dir`` (start-up, model thread); unreadable ones are logged and left in
        place. Returns the number of streams loaded."""
        from safetensors.torch import load_file

        if self.directory is None:
            return 0
        for leftover in self.directory.glob(".*.tmp"):  # a write cut short by a crash: never acknowledged
            leftover.unlink(missing_ok=True)
        loaded = 0
        for path in sorted(self.directory.glob(f"*{SNAPSHOT_SUFFIX}")):
            stream_id = path.name.removesuffix(SNAPSHOT_SUFFIX)
            if not _ID.fullmatch(stream_id) or stream_id in self.entries:
                continue
            try:
                tensors = load_file(os.fspath(path))
                meta = json.loads(bytes(tensors.pop(META_KEY).tolist()).decode())
                if meta.get("format") != SNAPSHOT_FORMAT or meta.get("stream_id") != stream_id:
                    raise ValueError(f"not a stream snapshot of format {SNAPSHOT_FORMAT} for this id")
                stream = Stream.from_state_dict(model, tensors)
            except Exception as err:  # a corrupt file or another model's stream: skip it, keep the file for a look
                log.warning("stream snapshot %s not loaded: %s: %s", path.name, type(err).__name__, err)
                continue
            entry = StreamEntry(
                stream_id, stream.num_series, stream.num_series * self.bytes_per_series(model, stream.context_length),
                self.clock(), model=meta.get("model") or model_name, item_ids=list(meta["item_ids"]),
                freqs=list(meta["freqs"]), ends=[None if end is None else _timestamp(end) for end in meta["ends"]],
                notes=list(meta.get("notes", [])), stream=stream,
            )
            self.entries[stream_id] = entry
            loaded += 1
        if loaded and (loaded > self.max_streams or self.total_bytes > self.max_stream_bytes):
            log.warning("%d streams reloaded from %s hold more than max_streams or max_stream_bytes allow; new "
                        "streams are refused until some are closed or expire", loaded, self.directory)
        return loaded


# ----------------------------------------------------------------------------------------------------------------
# Time axes (parse thread)


def advance_ends(
    entry: StreamEntry, steps: Sequence[int], timestamps: Sequence[Sequence[datetime] | None] | None
) -> list[pd.Timestamp | None]:
    """The series' last observation times after appending ``steps`` values, checking the given timestamps against
    their grids: each must be the next step after the previous observation.

    Raises:
        StreamInputError: a timestamp overlaps or precedes the series' observations, skips a step, differs in time
            zone, or is given for a series opened without start and freq.
    """
    errors: list[dict[str, Any]] = []
    ends: list[pd.Timestamp | None] = []
    for i, (end, freq, n) in enumerate(zip(entry.ends, entry.freqs, steps, strict=True)):
        given = None if timestamps is None else timestamps[i]
        if given is not None and n and (end is None or freq is None):
            errors.append(_error(("body", "timestamps", i), f"series {i} has no time axis (it was opened without start "
                                 "and freq, or its times passed the year 9999); leave its timestamps out (null)"))
            ends.append(end)
            continue
        if end is None or freq is None or n == 0:
            ends.append(end)
            continue
        offset = parse_freq(freq)
        try:
            expected = pd.date_range(start=end, periods=n + 1, freq=offset, unit=UNIT)[1:]
        except (OverflowError, ValueError):
            expected = None
        if given is not None:
            error = _check_times(i, end, given, expected)
            if error is not None:
                errors.append(error)
        new_end = None if expected is None else expected[-1]
        ends.append(new_end if new_end is not None and new_end.year <= MAX_YEAR else None)
    if errors:
        raise StreamInputError(errors[:20])
    return ends


def _check_times(
    i: int, end: pd.Timestamp, given: Sequence[datetime], expected: pd.DatetimeIndex | None
) -> dict[str, Any] | None:
    previous = end
    for k, value in enumerate(given):
        stamp = pd.Timestamp(value).as_unit(UNIT)
        loc = ("body", "timestamps", i, k)
        if (stamp.tz is None) != (previous.tz is None) or (stamp.tz is not None and stamp.utcoffset() !=
                                                           previous.utcoffset()):
            return _error(loc, f"timestamp {stamp.isoformat()} is not in the series' time zone (its last observation "
                          f"is {previous.isoformat()})", value.isoformat())
        if stamp <= previous:
            what = "overlaps the observations already streamed" if k == 0 else "is out of order"
            return _error(loc, f"timestamp {stamp.isoformat()} {what}: it is not after the previous observation at "
                          f"{previous.isoformat()}", value.isoformat())
        want = None if expected is None else expected[k]
        if want is None or stamp != want:
            shown = "past the year 9999" if want is None else want.isoformat()
            return _error(loc, f"timestamp {stamp.isoformat()} does not continue the series' grid: expected "
                          f"{shown}, the step after {previous.isoformat()} (send null values for missing steps)",
                          value.isoformat())
        previous = stamp
    return None


def _error(loc: tuple[int | str, ...], message: str, value: Any = None) -> dict[str, Any]:
    return {"type": "value_error", "loc": list(loc), "msg": message, "input": value}


def _timestamp(text: str) -> pd.Timestamp:
    return pd.Timestamp(datetime.fromisoformat(text)).as_unit(UNIT)


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
