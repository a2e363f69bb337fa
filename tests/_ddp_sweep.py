"""The tiny sweep of tests/test_sweep.py in a process of its own, its runs trained data-parallel: Lightning's DDP
starts the other processes by re-running this command line (under pytest it would re-run pytest).

Usage: PYTHONPATH=. python tests/_ddp_sweep.py OUT CORPUS BENCHMARK DEVICES  (the worktree's tsfm)
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from test_sweep import settings

from tsfm.pipelines.sweep import plan_runs, run_sweep


def main(argv: list[str]) -> None:
    out, corpus, benchmark, devices = Path(argv[0]), Path(argv[1]), Path(argv[2]), int(argv[3])
    sweep = dataclasses.replace(settings(out, corpus, benchmark), devices=devices)
    run_sweep(plan_runs(["mamba2"], ["1M"]), sweep, progress=False)


if __name__ == "__main__":
    main(sys.argv[1:])
