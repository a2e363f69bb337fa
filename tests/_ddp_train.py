"""A tiny training run of tests/test_train.py in a process of its own: Lightning's DDP starts the other processes by
re-running this command line (under pytest it would re-run pytest).

Usage: PYTHONPATH=. python tests/_ddp_train.py OUT DEVICES [STOP_AT]  (the worktree's tsfm)
"""

from __future__ import annotations

import sys

from test_train import _StopAt, ddp_case


def main(argv: list[str]) -> None:
    out, devices = argv[0], int(argv[1])
    ddp_case(out, devices, callbacks=[_StopAt(int(argv[2]))] if len(argv) > 2 else [])


if __name__ == "__main__":
    main(sys.argv[1:])
