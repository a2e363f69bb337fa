"""Print one line per finished pretraining run from its ``provenance.json``: what a device call's output shows of it.

The device scripts (``pretrain.sh``, ``pretrain_many.sh``) call this after training, so a call's short output tail
names the steps done, the windows seen, the best validation loss and the step its exported weights come from, and
the throughput, the same way for every run. ``--steady-from STEP`` adds the steps per second from that step on, read
from the run's logged seconds: the rate without the compile and the first steps, which is what an A/B of a training
setting compares (``rate_ab.sh``).

    python3 scripts/device/summarise_run.py runs/NAME [runs/OTHER ...] [--steady-from 300]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

FIELDS = ("steps", "windows_seen", "train_seconds", "best_val_loss", "best_step", "final_train_loss")


def summarise(run_dir: Path) -> str:
    """One line: the run's name, its provenance fields and its windows per second over the whole run."""
    provenance_path = run_dir / "provenance.json"
    if not provenance_path.is_file():
        return f"{run_dir.name}: no provenance.json (the run did not finish its export)"
    provenance = json.loads(provenance_path.read_text())
    fields = {key: provenance.get(key) for key in FIELDS}
    seconds = provenance.get("train_seconds") or 0
    rate = f"windows/s {provenance['windows_seen'] / seconds:.0f}" if seconds else "windows/s n/a"
    return f"{run_dir.name} {fields} {rate}"


def steady_rate(run_dir: Path, first_step: int) -> str:
    """Steps per second between the first logged step at or after ``first_step`` and the last one (every call's
    metrics file of the run), from the ``train_seconds`` the run logs."""
    from tsfm.pipelines.train import read_metrics  # here: the one-line summary alone stays free of torch's import

    metrics = read_metrics(run_dir)  # one row per step, in step order
    if "train_seconds" not in metrics:
        return f"steady steps/s from step {first_step}: n/a (no logged seconds)"
    logged = metrics[metrics["step"] >= first_step].dropna(subset=["train_seconds"])
    if len(logged) < 2 or logged["train_seconds"].iloc[-1] <= logged["train_seconds"].iloc[0]:
        return f"steady steps/s from step {first_step}: n/a (fewer than two logged steps)"
    first, last = logged.iloc[0], logged.iloc[-1]
    rate = (last["step"] - first["step"]) / (last["train_seconds"] - first["train_seconds"])
    return f"steady steps/s from step {int(first['step'])} to {int(last['step'])}: {rate:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders written by `tsfm train --out`")
    parser.add_argument("--steady-from", type=int, default=None, metavar="STEP",
                        help="also print the steps per second from this step on (after the compile)")
    args = parser.parse_args()
    for run_dir in args.runs:
        print(summarise(run_dir))
        if args.steady_from is not None:
            print(f"{run_dir.name} {steady_rate(run_dir, args.steady_from)}")


if __name__ == "__main__":
    main()
