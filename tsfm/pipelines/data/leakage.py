"""Window-level leakage check: does any stretch of a benchmark series occur anywhere in the training data?

Whole-series fingerprints (:func:`tsfm.pipelines.data.build.series_fingerprints`) catch a series copied whole or
with another tail; they miss a benchmark series that reappears as a *piece* of a longer training series (a
competition reusing a slice, a dataset holding another's sensor). Here every non-overlapping ``width``-step chunk of
every benchmark series is hashed, and every ``width``-step window at *every offset* of every training series is
hashed too, in O(length) per series with a polynomial rolling hash over the float32 bit patterns (modulo 2^64,
where an odd base has an inverse, so window hashes come from prefix sums without a loop). Hash matches are then
compared value by value, so a reported overlap is a real one.

Chunks that carry no identity (fewer than ``min_distinct`` distinct values: runs of zeros in intermittent data, a
flat line, a sensor stuck at one reading) occur in unrelated data and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Overlap", "chunk_hashes", "find_overlaps", "window_hashes"]

_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd, so invertible modulo 2^64
_BASE_INVERSE = np.uint64(pow(int(_BASE), -1, 2**64))


@dataclass(frozen=True)
class Overlap:
    """A benchmark chunk found in a training series: which series, where, and which benchmark series/offset."""

    train_index: int
    train_offset: int
    benchmark_index: int
    benchmark_offset: int


def _bits(values: np.ndarray) -> np.ndarray:
    """float32 bit patterns as uint64, NaN made canonical (all NaNs hash alike)."""
    canonical = np.where(np.isnan(values), np.float32(np.nan), values.astype(np.float32))
    return canonical.view(np.uint32).astype(np.uint64)


def _powers(count: int, base: np.uint64) -> np.ndarray:
    powers = np.empty(count, dtype=np.uint64)
    powers[0] = 1
    with np.errstate(over="ignore"):
        powers[1:] = base
        np.multiply.accumulate(powers, out=powers)
    return powers


def window_hashes(values: np.ndarray, width: int) -> np.ndarray:
    """Hash of the ``width``-step window starting at every offset of ``values`` (``len - width + 1`` hashes)."""
    count = values.size - width + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    with np.errstate(over="ignore"):
        weighted = _bits(values) * _powers(values.size, _BASE)
        prefix = np.concatenate([[np.uint64(0)], np.cumsum(weighted, dtype=np.uint64)])
        return (prefix[width:] - prefix[:count]) * _powers(count, _BASE_INVERSE)


def _informative(chunk: np.ndarray, min_distinct: int) -> bool:
    finite = chunk[np.isfinite(chunk)]
    return finite.size == chunk.size and np.unique(finite).size >= min_distinct


def chunk_hashes(series: Sequence[np.ndarray], width: int = 32,
                 min_distinct: int = 8) -> dict[int, list[tuple[int, int]]]:
    """``{hash: [(series index, offset), ...]}`` of the informative non-overlapping chunks of ``series``."""
    out: dict[int, list[tuple[int, int]]] = {}
    for index, values in enumerate(series):
        values = np.asarray(values, dtype=np.float32)
        hashes = window_hashes(values, width)
        for offset in range(0, values.size - width + 1, width):
            if _informative(values[offset : offset + width], min_distinct):
                out.setdefault(int(hashes[offset]), []).append((index, offset))
    return out


def find_overlaps(train: Iterable[np.ndarray], benchmark: Sequence[np.ndarray], *, width: int = 32,
                  min_distinct: int = 8) -> list[Overlap]:
    """Every place where an informative ``width``-step chunk of a benchmark series occurs in a training series
    (checked value by value after a hash match)."""
    bench_series = [np.asarray(b, dtype=np.float32) for b in benchmark]
    table = chunk_hashes(bench_series, width, min_distinct)
    keys = np.sort(np.fromiter(table.keys(), dtype=np.uint64, count=len(table)))  # sorted once, searched per series
    found: list[Overlap] = []
    for train_index, values in enumerate(train):
        values = np.asarray(values, dtype=np.float32)
        hashes = window_hashes(values, width)
        if not keys.size or not hashes.size:
            continue
        nearest = keys[np.minimum(np.searchsorted(keys, hashes), keys.size - 1)]
        for offset in np.flatnonzero(nearest == hashes):
            window = values[offset : offset + width]
            for bench_index, bench_offset in table[int(hashes[offset])]:
                chunk = bench_series[bench_index][bench_offset : bench_offset + width]
                if np.array_equal(window, chunk):
                    found.append(Overlap(train_index, int(offset), bench_index, bench_offset))
    return found
