"""The real pretraining corpus in memory: every univariate series of a GIFT-Eval root, dataset-balanced weights, and
a validation split of whole series.

Why whole series: a window held out of a series the model trains on shares its level, season and noise with the
training windows, so its loss flatters the model. Holding out whole series (about ``validation_share`` of each
dataset, chosen by a hash of ``dataset/item_id/variate`` so the split never depends on reading order or on which
other datasets are present) gives a validation loss that measures generalisation to unseen series, which is what
checkpoint selection needs. The benchmark is never used for that.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["Corpus", "CorpusError", "load_corpus", "validation_member"]


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

    def append(self, values: np.ndarray, dataset: str) -> None:
        self.series.append(values)
        self.datasets.append(dataset)


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
) -> tuple[Corpus, Corpus]:
    """Read every dataset under ``root`` (GIFT-Eval layout, e.g. ``tsfm data build-pretrain`` output or a
    GiftEvalPretrain download) into ``(train, validation)``.

    Args:
        root: folder of GIFT-Eval datasets.
        min_length: series with fewer observed steps are dropped (nothing to learn from them).
        max_length: keep only the last ``max_length`` steps of longer series (memory; ``None`` keeps all).
        validation_share: share of whole series held out per dataset (by hash; see :func:`validation_member`).
        datasets: only these dataset names (as :func:`~tsfm.pipelines.data.gift_format.list_datasets` gives them).

    Raises:
        CorpusError: ``root`` is not a folder, holds no dataset, a dataset cannot be read, or no series is usable.
    """
    from .gift_format import GiftFormatError, NotADatasetError, list_datasets, read_dataset

    path = Path(root)
    if not path.is_dir():
        raise CorpusError(f"corpus folder {path} does not exist")
    if not 0.0 <= validation_share < 1.0:
        raise CorpusError(f"validation_share must be in [0, 1), got {validation_share}")
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
        for entry in entries:
            target = np.asarray(entry["target"], dtype=np.float32)
            for v, variate in enumerate(target.reshape(-1, target.shape[-1])):
                if max_length is not None and variate.size > max_length:
                    variate = variate[-max_length:]
                if np.isfinite(variate).sum() < min_length:
                    continue
                key = f"{name}/{entry['item_id']}/{v}"
                split = validation if validation_member(key, validation_share) else train
                split.append(np.ascontiguousarray(variate), name)
    if not len(train):
        raise CorpusError(f"no series under {path} has at least {min_length} observed steps")
    return train, validation
