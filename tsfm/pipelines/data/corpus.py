"""The real pretraining corpus in memory: every univariate series of a GIFT-Eval root, dataset-balanced weights, and
a validation split of whole series.

Why whole series: a window held out of a series the model trains on shares its level, season and noise with the
training windows, so its loss flatters the model. Holding out whole series (about ``validation_share`` of each
dataset, chosen by a hash of ``dataset/item_id/variate`` so the split never depends on reading order or on which
other datasets are present) gives a validation loss that measures generalisation to unseen series, which is what
checkpoint selection needs. The benchmark is never used for that.

Whole series leave a gap, though: a dataset of one to a few series (most single long hourly or minute-level series)
is then held out entirely or not at all, and a 5% split of the pretraining corpus held out no series of 23 of its 38
datasets, 10 of its 12 high-frequency ones. ``validation_split="covering"`` keeps whole series for datasets of at
least :data:`MIN_SERIES_FOR_WHOLE_SERIES` series and holds out the *end* of every series of the smaller ones (the
last ``validation_share`` of its steps, at least :data:`MIN_HELD_OUT_STEPS`; a series too short for that follows the
whole-series rule): values the model never trains on, from nearly every dataset, so the validation loss sees every
frequency of the corpus. Such a series enters the validation corpus whole, with ``score_from`` at its end's first
step: its windows forecast into the end from a context of the steps before it, as the benchmark forecasts from a
series' history (an end of 5% alone would leave a 5-minute series a few hundred steps of context).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

VALIDATION_SPLITS = ("series", "covering", "common")
"""How :func:`load_corpus` holds out validation data: whole series only, also the ends of series (see above), or
what both of those hold out ("common": to judge a model trained under one beside a model trained under the other,
on values neither trained on)."""
MIN_SERIES_FOR_WHOLE_SERIES = 20
"""Under ``"covering"``, datasets with fewer series are held out in time, at the end of each series."""
MIN_HELD_OUT_STEPS = 64
"""Under ``"covering"``, the shortest held-out end (two patches); a series shorter than four times its end follows the
whole-series rule instead."""

__all__ = ["VALIDATION_SPLITS", "Corpus", "CorpusError", "load_corpus", "validation_member"]


class CorpusError(ValueError):
    """The corpus folder is missing, malformed or holds no usable series."""


@dataclass
class Corpus:
    """Univariate float32 series with the dataset each came from and its sampling weight.

    Weights give every dataset the same total share (``1 / #datasets``), split evenly over its series, so one huge
    dataset does not drown the small ones.
    """

    series: list[np.ndarray] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    score_from: list[int] = field(default_factory=list)
    """Per series, the first step a window may forecast (0: any); the steps before it serve only as context."""
    frequencies: list[str] = field(default_factory=list)
    """Per series, its pandas frequency string as the dataset gives it (``""``: unknown)."""

    def __post_init__(self) -> None:
        if not self.score_from:
            self.score_from = [0] * len(self.series)
        if not self.frequencies:
            self.frequencies = [""] * len(self.series)
        if not len(self.series) == len(self.datasets) == len(self.score_from) == len(self.frequencies):
            raise CorpusError("a Corpus needs one dataset name, one score_from and one frequency per series")

    def __len__(self) -> int:
        return len(self.series)

    @property
    def weights(self) -> np.ndarray:
        names, counts = np.unique(np.asarray(self.datasets), return_counts=True)
        per_series = dict(zip(names.tolist(), (1.0 / (len(names) * counts)).tolist(), strict=True))
        return np.asarray([per_series[name] for name in self.datasets], dtype=np.float64)

    @property
    def num_values(self) -> int:
        return int(sum(s.size for s in self.series))

    def append(self, values: np.ndarray, dataset: str, score_from: int = 0, freq: str = "") -> None:
        self.series.append(values)
        self.datasets.append(dataset)
        self.score_from.append(score_from)
        self.frequencies.append(freq)


def validation_member(key: str, share: float) -> bool:
    """Whether the series named ``key`` belongs to the validation split (a stable hash, not a random draw)."""
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2**64 < share


def load_corpus(
    root: str | os.PathLike[str],
    *,
    min_length: int = 16,
    max_length: int | None = None,
    validation_share: float = 0.05,
    datasets: Sequence[str] | None = None,
    validation_split: str = "series",
) -> tuple[Corpus, Corpus]:
    """Read every dataset under ``root`` (GIFT-Eval layout, e.g. ``tsfm data build-pretrain`` output or a
    GiftEvalPretrain download) into ``(train, validation)``.

    Args:
        root: folder of GIFT-Eval datasets.
        min_length: series with fewer observed steps are dropped (nothing to learn from them).
        max_length: keep only the last ``max_length`` steps of longer series (memory; ``None`` keeps all).
        validation_share: share of whole series held out per dataset (by hash; see :func:`validation_member`).
        datasets: only these dataset names (as :func:`~tsfm.pipelines.data.gift_format.list_datasets` gives them).
        validation_split: ``"series"`` (whole series only), ``"covering"`` (also the ends of the series of small
            datasets; see the module docstring) or ``"common"`` (the validation values both hold out).

    Raises:
        CorpusError: ``root`` is not a folder, holds no dataset, a dataset cannot be read, or no series is usable.
    """
    from .gift_format import GiftFormatError, NotADatasetError, list_datasets, read_dataset

    path = Path(root)
    if not path.is_dir():
        raise CorpusError(f"corpus folder {path} does not exist")
    if not 0.0 <= validation_share < 1.0:
        raise CorpusError(f"validation_share must be in [0, 1), got {validation_share}")
    if validation_split not in VALIDATION_SPLITS:
        raise CorpusError(f"validation_split must be one of {', '.join(VALIDATION_SPLITS)}, got {validation_split!r}")
    try:
        names = list_datasets(path)
    except NotADatasetError:
        names = []
    if datasets is not None:
        unknown = sorted(set(datasets) - set(names))
        if unknown:
            raise CorpusError(f"datasets not under {path}: {', '.join(unknown)}")
        names = [n for n in names if n in set(datasets)]
    if not names:
        raise CorpusError(f"{path} holds no GIFT-Eval dataset (folders with dataset_info.json and .arrow shards)")
    train, validation = Corpus(), Corpus()
    for name in names:
        try:
            entries = read_dataset(path / name)
        except (GiftFormatError, OSError, ValueError) as err:
            raise CorpusError(f"cannot read dataset {name!r} under {path}: {err}") from err
        usable = []
        for entry in entries:
            target = np.asarray(entry["target"], dtype=np.float32)
            for v, variate in enumerate(target.reshape(-1, target.shape[-1])):
                if max_length is not None and variate.size > max_length:
                    variate = variate[-max_length:]
                if np.isfinite(variate).sum() >= min_length:
                    usable.append((f"{name}/{entry['item_id']}/{v}", np.ascontiguousarray(variate),
                                   str(entry.get("freq") or "")))
        in_time = validation_split != "series" and len(usable) < MIN_SERIES_FOR_WHOLE_SERIES
        for key, variate, freq in usable:
            held_out = validation_member(key, validation_share)
            # "common" scores an end only where "series" holds out the whole series too
            ends_to = validation if held_out or validation_split == "covering" else None
            if not (in_time and _split_in_time(variate, validation_share, min_length, name, freq, train, ends_to)):
                (validation if held_out else train).append(variate, name, freq=freq)
    if not len(train):
        raise CorpusError(f"no series under {path} has at least {min_length} observed steps")
    return train, validation


def _split_in_time(series: np.ndarray, share: float, min_length: int, dataset: str, freq: str, train: Corpus,
                   validation: Corpus | None) -> bool:
    """The end of ``series`` (``share`` of its steps, at least :data:`MIN_HELD_OUT_STEPS`) to ``validation`` (the whole
    series, scored from the end on; nowhere when ``None``), the rest to ``train``; False (nothing added) for a series
    too short to spare it or whose either part would be unusable, which the whole-series rule then places."""
    held_out = max(MIN_HELD_OUT_STEPS, int(np.ceil(share * series.size)))
    head, tail = series[:-held_out], series[-held_out:]
    if share == 0 or series.size < 4 * held_out or min(np.isfinite(head).sum(), np.isfinite(tail).sum()) < min_length:
        return False
    train.append(np.ascontiguousarray(head), dataset, freq=freq)
    if validation is not None:
        validation.append(series, dataset, score_from=head.size, freq=freq)
    return True
