"""The files an evaluation writes and reads: ``OUT/<model>/all_results.csv`` (GIFT-Eval's columns, rows merged by
key) and ``OUT/<model>/run.json`` (settings, wall times, normalised values, the machine and versions, merged over
runs), and the plain-text summary ``tsfm evaluate`` prints last. Files are written atomically."""

from __future__ import annotations

import json
import math
import os
import platform
from pathlib import Path
from typing import Any

import pandas as pd

from ..data.gift_eval import BENCHMARK_FILE
from .aggregate import summarise
from .errors import EvaluationError
from .protocol import CRPS, MASE, RESULT_COLUMNS

RESULTS_FILE = "all_results.csv"
RUN_FILE = "run.json"


def read_results(path: str | os.PathLike[str]) -> pd.DataFrame:
    """An ``all_results.csv`` file, or every one below a folder, as one frame (GIFT-Eval's columns first)."""
    p = Path(path)
    files = [p] if p.is_file() else sorted(p.rglob(RESULTS_FILE)) if p.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no {RESULTS_FILE} at {p}: run `tsfm evaluate ... --out DIR` first")
    frames = [pd.read_csv(f) for f in files]
    for f, frame in zip(files, frames, strict=True):
        missing = [c for c in ("dataset", "model", MASE, CRPS) if c not in frame.columns]
        if missing:
            raise EvaluationError(f"{f} is not a GIFT-Eval results file: columns {missing} are missing")
    return pd.concat(frames, ignore_index=True)


def write_results_csv(frame: pd.DataFrame, path: Path) -> None:
    """Merge ``frame`` into ``path`` (rows with the same ``dataset`` key are replaced) and write it atomically."""
    if path.is_file():
        old = pd.read_csv(path)
        frame = pd.concat([old[~old["dataset"].isin(frame["dataset"])], frame], ignore_index=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    frame.loc[:, list(RESULT_COLUMNS)].to_csv(tmp, index=False)
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _write_json(payload: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def machine() -> dict[str, Any]:
    """What the wall times were measured on."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    except ImportError:  # pragma: no cover - torch is a tsfm dependency
        pass
    return info


def benchmark_build_seconds(root: Path) -> float | None:
    listing = root / BENCHMARK_FILE
    if listing.is_file():
        return json.loads(listing.read_text()).get("build_seconds")
    return None


def write_run(run: dict[str, Any], out: str | os.PathLike[str], previous: dict[str, Any] | None) -> dict[str, Any]:
    """Write ``OUT/<model>/run.json``: this run folded into ``previous`` (the file as it was before this run began,
    see :func:`_merge_runs`), as rows are merged into ``all_results.csv``; returns what was written."""
    if previous is not None:
        run = _merge_runs(previous, run)
    _write_json(run, Path(out) / run["model"] / RUN_FILE)
    return run


def _merge_runs(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Fold an earlier ``run.json`` of the same model and benchmark into a new one, as the rows of
    ``all_results.csv`` are merged: per-configuration times and ratios are united (new ones win) and the totals and
    geometric means recomputed; the commands of both runs are kept."""
    if old.get("model") != new["model"] or old.get("benchmark") != new["benchmark"]:
        return new
    seconds = {**old.get("seconds_per_configuration", {}), **new["seconds_per_configuration"]}
    ratios = {**old.get("normalised", {}), **new["normalised"]}
    norm = pd.DataFrame(
        [(key, new["model"], key.rsplit("/", 1)[-1], v["MASE"], v["CRPS"]) for key, v in ratios.items()],
        columns=["dataset", "model", "term", "MASE", "CRPS"],
    )
    commands = [*old.get("commands", [old.get("command")]), new["command"]]
    return {
        **new,
        "configurations": len(seconds),
        "wall_seconds": round(sum(seconds.values()), 1),
        "seconds_per_configuration": seconds,
        "normalised": ratios,
        "geometric_mean": summarise(norm).get(new["model"], {}) if len(norm) else {},
        "commands": [c for c in dict.fromkeys(commands) if c],
    }


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("tsfm", "gluonts", "statsforecast", "numpy", "pandas"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            continue
    return out


def format_summary(report: dict[str, dict[str, Any]]) -> str:
    """A plain-text table of the geometric means and wall times, printed last by ``tsfm evaluate``."""
    lines = [f"{'model':24s} {'configs':>7s} {'MASE/SN':>8s} {'CRPS/SN':>8s} {'wall s':>8s}"]
    for name, item in report.items():
        run = item["run"]
        overall = run["geometric_mean"].get("overall", {})
        mase, crps = overall.get("MASE", math.nan), overall.get("CRPS", math.nan)
        lines.append(f"{name:24s} {run['configurations']:>7d} {mase:>8.3f} {crps:>8.3f} {run['wall_seconds']:>8.1f}")
    return "\n".join(lines)
