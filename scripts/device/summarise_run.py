"""Print one line per finished pretraining run from its ``provenance.json``: what a device call's output shows of it.

The device scripts (``pretrain.sh``, ``pretrain_many.sh``) call this after training, so a call's short output tail
names the steps done, the windows seen, the best validation loss and the step its exported weights come from, and
the throughput, the same way for every run.

    python3 scripts/device/summarise_run.py runs/NAME [runs/OTHER ...]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders written by `tsfm train --out`")
    for run_dir in parser.parse_args().runs:
        print(summarise(run_dir))


if __name__ == "__main__":
    main()
