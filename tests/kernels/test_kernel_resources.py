"""``benchmarks/kernel_resources.py``: our kernels compile for sm_90 on the CPU and ptxas reports their resources.

Run as a subprocess: the kernel tests import Triton under ``TRITON_INTERPRET=1``, where kernels cannot be compiled.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="Triton is not installed (pip install triton==3.6.0)")

REPO = Path(__file__).resolve().parents[2]
SLSTM_FWD = [
    "tsfm.kernels.slstm.fused:_slstm_fwd_kernel",
    "--constexpr", "H=2", "D=16", "BB=16", "BD=16", "HAS_INIT=0", "STORE_FINAL=0", "STORE_STATES=0",
    "PRECISION=tf32", "R_STREAM=0",
    "--bf16", "x", "r", "out", "--ints", "B", "T",
]  # fmt: skip


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    command = [sys.executable, "-m", "benchmarks.kernel_resources", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)


def test_the_slstm_forward_compiles_for_sm90_and_reports_its_resources():
    result = _run(*SLSTM_FWD, "--warps", "4", "8")
    assert result.returncode == 0, result.stderr
    rows = [line.split("|")[1:-1] for line in result.stdout.splitlines()[2:]]
    assert [int(row[0]) for row in rows] == [4, 8]
    for _, registers, spill_stores, spill_loads, shared in rows:
        assert 0 < int(registers) <= 255 and int(spill_stores) >= 0 and int(spill_loads) >= 0
        assert 0 < int(shared) <= 232448


def test_a_constexpr_the_kernel_does_not_take_is_refused():
    result = _run(*SLSTM_FWD, "--constexpr", "NOT_A_PARAMETER=1")  # replaces the list above
    assert result.returncode != 0 and "NOT_A_PARAMETER" in result.stderr
