"""Which configurations of a benchmark root to evaluate, and their result keys (``m4_hourly/H/short``).

A root is a folder built by ``tsfm data build-benchmark`` (its ``benchmark.json`` lists the configurations) or a
GIFT-Eval download (its 97 official configurations, those present).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from ..data.gift_eval import BENCHMARK_FILE, GIFT_EVAL_CONFIGS, GiftEvalDataset, config_key, configurations
from ..data.gift_format import is_dataset_dir
from .errors import BenchmarkError, UnknownConfigError


def select_configs(root: str | os.PathLike[str], configs: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """The (dataset folder, term) pairs of a benchmark root, optionally narrowed to ``configs``.

    Args:
        root: a folder built by ``tsfm data build-benchmark`` (``benchmark.json``) or a GIFT-Eval download.
        configs: result keys (``m4_hourly/H/short``) or dataset folder names (``ett1/H``: all its terms).

    Raises:
        BenchmarkError: ``root`` is missing or holds neither ``benchmark.json`` nor any GIFT-Eval dataset.
        UnknownConfigError: a requested configuration is not in the benchmark (the message lists the known ones).
    """
    path = Path(root)
    if not path.is_dir():
        raise BenchmarkError(f"benchmark folder {path} does not exist")
    if not (path / BENCHMARK_FILE).is_file() and not any(is_dataset_dir(path / n) for n, _ in GIFT_EVAL_CONFIGS):
        raise BenchmarkError(
            f"{path} is not a benchmark: it has no {BENCHMARK_FILE} and none of GIFT-Eval's dataset folders; build "
            "one with `tsfm data build-benchmark --out DIR` or point at a GIFT-Eval download"
        )
    official = not (path / BENCHMARK_FILE).is_file()
    try:
        available = configurations(path, skip_missing=official)
    except FileNotFoundError as err:
        raise BenchmarkError(str(err)) from None
    if official and len(available) < len(GIFT_EVAL_CONFIGS):
        warnings.warn(
            f"{path}: {len(GIFT_EVAL_CONFIGS) - len(available)} of GIFT-Eval's {len(GIFT_EVAL_CONFIGS)} "
            f"configurations have no dataset folder; only the {len(available)} present are evaluated",
            UserWarning,
            stacklevel=2,
        )
    if not configs:
        return available
    keys = {key: config for config, key in config_keys(path, available).items()}
    chosen: list[tuple[str, str]] = []
    for wanted in configs:
        matches = [keys[wanted]] if wanted in keys else [(n, t) for n, t in available if n == wanted]
        if not matches:
            raise UnknownConfigError(
                f"unknown configuration {wanted!r} in {path}; choose result keys or dataset folders: {', '.join(keys)}"
            )
        chosen.extend(m for m in matches if m not in chosen)
    return [c for c in available if c in chosen]


def config_keys(root: str | os.PathLike[str], available: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Result keys of configurations: from ``benchmark.json``, else from the names (reading the data's frequency
    only for a GIFT-Eval folder whose name carries none)."""
    listing = Path(root) / BENCHMARK_FILE
    if listing.is_file():
        return {(c["dataset"], c["term"]): c["key"] for c in json.loads(listing.read_text())["configurations"]}
    out = {}
    for name, term in available:
        try:
            out[(name, term)] = config_key(name, term)
        except ValueError:
            out[(name, term)] = GiftEvalDataset(name, term, root=root).config_key
    return out
