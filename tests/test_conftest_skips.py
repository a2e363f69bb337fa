"""The CI skip guard of tests/conftest.py, run on a tiny test file in a child pytest (a positive control)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SKIPPING_TEST = "import pytest\n\ndef test_skips():\n    pytest.skip('input not here')\n\ndef test_runs():\n    pass\n"


def _pytest(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess:
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    (tests / "test_sample.py").write_text(SKIPPING_TEST)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the guard is the conftest alone; installed plugins only cost seconds
    if ci is not None:
        env["CI"] = ci
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tests)]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_an_unexpected_skip_fails_the_run_in_ci(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "true")
    assert done.returncode == 1, done.stdout
    assert "skipped that must run here" in done.stdout
    assert "test_sample.py::test_skips: Skipped: input not here" in done.stdout


def test_outside_ci_a_skip_is_listed_with_its_reason(tmp_path: Path) -> None:
    done = _pytest(tmp_path, None)
    assert done.returncode == 0, done.stdout
    assert "SKIPPED" in done.stdout and "input not here" in done.stdout


def test_an_allowed_skip_passes_in_ci(tmp_path: Path) -> None:
    conftest = (REPO / "tests" / "conftest.py").read_text()
    assert "ALLOWED_SKIPS: dict[str, str] = " in conftest
    patched = conftest + '\nALLOWED_SKIPS["input not here"] = "the sample says so"\n'  # read when the session ends
    done = _pytest(tmp_path, "true")  # writes the files; overwrite the conftest and run again
    (tmp_path / "tests" / "conftest.py").write_text(patched)
    env = {**os.environ, "CI": "true", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    again = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "tests")],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and again.returncode == 0, again.stdout
