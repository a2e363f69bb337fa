"""Session-wide test set-up: Triton's mode before any test module is imported, and honest skips in CI.

Triton fixes its mode (compiled or interpreted) at its first import, and importing ``tsfm`` already imports it
(``torch.compiler.disable`` around the sequence ops loads ``torch._dynamo``, which loads Triton). The CPU test
machine has no GPU, so every in-process test runs Triton's interpreter; tests that compile for a GPU target
(``test_kernel_resources``) do so in a subprocess with the variable removed.

Parallel runs (``pytest -n 2 --dist loadfile``, pytest-xdist, as ``make test`` runs the suite): each worker process
uses its share of the CPU cores for torch (``OMP_NUM_THREADS``); a test file runs in one worker, so its module-scoped
fixtures are made once; the one expensive session fixture used by two files (``built``, tests/data/conftest.py) is
made once per run under a file lock. (``--dist loadgroup`` cannot be used: pytest-xdist 3.8 renames the node ids of
grouped tests through an attribute pytest 9 no longer reads, so the groups are ignored.)

Skips: ``-rs`` (pyproject) lists every skip with its reason. Where ``CI`` is true (``.ci/run`` sets it) CI has
every input (``../shared``, the browser, every extra), so a skip means a test silently stopped testing: the run
fails unless the skip's reason matches :data:`ALLOWED_SKIPS`, each entry saying why that skip is expected.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):  # a worker of `pytest -n N`: share the cores instead of N-fold
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _cores // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

# substring of a skip reason -> why that skip is expected in CI
ALLOWED_SKIPS: dict[str, str] = {
    "needs CUDA: captures a CUDA graph": "CI machines have no GPU; on the GPU machine benchmarks/stream_gpu.py checks "
    "the graphed stream step against the eager one in every run",
}

_skipped: list[tuple[str, str]] = []


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory):
    """A checkpoint folder of a tiny random ``xlstm[1:1]`` model with the shipped models' patches (32) and a context
    of 512: where a test needs a model by path and its weights do not matter (the package ships only trained ones)."""
    import torch

    from tsfm.checkpoint import save_model
    from tsfm.config import ModelConfig
    from tsfm.model import Forecaster

    torch.manual_seed(0)
    config = ModelConfig(backbone="xlstm[1:1]", d_model=32, n_layers=2, n_heads=2, chunk_size=4, patch_size=32,
                         context_length=512)
    return save_model(Forecaster(config).eval(), tmp_path_factory.mktemp("checkpoints") / "tiny")


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def unexpected_skips(skipped: list[tuple[str, str]], allowed: dict[str, str]) -> list[tuple[str, str]]:
    """The ``(test id, reason)`` pairs whose reason matches no allowed entry."""
    return [(node, reason) for node, reason in skipped if not any(key in reason for key in allowed)]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append((report.nodeid, reason))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _in_ci():
        return
    bad = unexpected_skips(_skipped, ALLOWED_SKIPS)
    if bad:
        lines = "\n".join(f"  {node}: {reason}" for node, reason in bad)
        print(f"\nCI=true and {len(bad)} test(s) skipped that must run here (allow-list: tests/conftest.py):\n{lines}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
