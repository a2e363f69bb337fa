"""Run a grid of cells (task x backbone x seed) and append their rows to ``OUT/results.csv``; resumable.

A cell is finished when the CSV holds its rows for every evaluation length under the same recipe (train length
and steps); finished cells are skipped, so an interrupted grid continues where it stopped, and a grid with more
steps adds new rows beside the old ones. Rows are appended as each cell finishes, by this (parent) process only.

Small models cannot fill a GPU alone, so ``parallel > 1`` trains that many cells side by side in worker processes
(``spawn``: each worker owns its CUDA context and keeps its compiled kernels across the cells it trains). A cell
that fails is reported and skipped; the others go on.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import shlex
import sys
import time
import traceback
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.pool import IMapIterator
from pathlib import Path
from typing import Any

from tsfm.pipelines.state_tracking.train import RESULT_COLUMNS, Cell, TrainSettings

RESULTS_FILE = "results.csv"


class StateTrackingError(ValueError):
    """A request that cannot run (unknown task or backbone, bad seeds, unreadable results); raised before compute."""


@dataclass
class GridSummary:
    """What a call of :func:`run_grid` did."""

    ran: list[Cell] = field(default_factory=list)
    skipped: list[Cell] = field(default_factory=list)
    failed: dict[Cell, str] = field(default_factory=dict)
    unfinished: list[Cell] = field(default_factory=list)


def plan_cells(tasks: Sequence[str], backbones: Sequence[str], seeds: Sequence[int]) -> list[Cell]:
    """The grid, seed-major (all of seed 0, then seed 1, ...: a grid cut short by its time budget still has every
    task x backbone), checked before compute: every task and backbone spec must be known (each backbone is built
    once on the meta device, so a malformed spec fails here, not in a worker)."""
    import torch

    from tsfm.pipelines.state_tracking.model import TokenClassifier
    from tsfm.pipelines.state_tracking.tasks import get_task

    if not tasks or not backbones or not seeds:
        raise StateTrackingError("need at least one task, one backbone and one seed")
    for name in (tasks, backbones, seeds):
        duplicates = sorted({str(x) for x in name if list(name).count(x) > 1})
        if duplicates:
            raise StateTrackingError(f"listed twice: {', '.join(duplicates)}")
    try:
        for task in tasks:
            get_task(task)
        for backbone in backbones:
            with torch.device("meta"):
                TokenClassifier(backbone, vocab_size=4, num_classes=2)
    except ValueError as err:
        raise StateTrackingError(str(err)) from None
    return [Cell(task, backbone, seed) for seed in seeds for task in tasks for backbone in backbones]


def read_results(path: Path) -> list[dict[str, str]]:
    """The rows of a results CSV as strings (empty when the file does not exist)."""
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in ("task", "backbone", "seed", "train_length", "eval_length", "steps")
                   if c not in (reader.fieldnames or [])]
        if missing:
            raise StateTrackingError(f"{path}: not a state-tracking results file (missing columns {missing})")
        return list(reader)


def finished_cells(rows: Iterable[dict[str, str]], settings: TrainSettings) -> set[Cell]:
    """Cells whose rows cover every evaluation length of ``settings`` at its train length and steps."""
    lengths: dict[Cell, set[int]] = {}
    for row in rows:
        if int(row["train_length"]) == settings.train_length and int(row["steps"]) == settings.steps:
            cell = Cell(row["task"], row["backbone"], int(row["seed"]))
            lengths.setdefault(cell, set()).add(int(row["eval_length"]))
    wanted = set(settings.eval_lengths)
    return {cell for cell, seen in lengths.items() if wanted <= seen}


def append_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Append rows (header first when the file is new) and flush, so a stopped grid loses at most one cell."""
    new = not path.is_file() or path.stat().st_size == 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=RESULT_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def _record_call(out: Path, settings: TrainSettings, cells: Sequence[Cell], parallel: int, command: str | None) -> None:
    """Append the call (command line, recipe, grid) to ``OUT/runs.jsonl``: every row traces back to a command."""
    record = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": command or shlex.join(sys.argv),
              "settings": asdict(settings), "cells": len(cells), "parallel": parallel}
    with (out / "runs.jsonl").open("a") as fh:
        fh.write(json.dumps(record) + "\n")


Outcome = tuple[Cell, list[dict[str, Any]] | None, str]
"""A cell, its rows (``None`` when it failed) and the failure's traceback (``""`` when it did not)."""


def _until(outcomes: Iterator[Outcome], deadline: float | None) -> Iterator[Outcome]:
    """The outcomes that arrive before ``deadline`` (``time.monotonic()``); a pool's iterator is waited on with a
    timeout, so a budget is kept even while no cell finishes. In-process cells are checked between cells."""
    while deadline is None or time.monotonic() < deadline:
        try:
            if isinstance(outcomes, IMapIterator):
                yield outcomes.next(None if deadline is None else max(0.0, deadline - time.monotonic()))
            else:
                yield next(outcomes)
        except (StopIteration, multiprocessing.TimeoutError):
            return


def _work(job: tuple[Cell, TrainSettings, str | None]) -> Outcome:
    """Worker entry: train one cell; a failure comes back as its traceback instead of killing the grid."""
    from tsfm.pipelines.state_tracking.train import run_cell

    cell, settings, device = job
    try:
        return cell, run_cell(cell, settings, device), ""
    except Exception:  # report and go on: one backbone's failure must not cost the others' results
        return cell, None, traceback.format_exc()


def _init_worker(workers: int) -> None:
    """Share the cores: each worker's CPU work (data, and on CPU the model) gets ``cores / workers`` threads."""
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def run_grid(cells: Sequence[Cell], settings: TrainSettings, out: Path, *, parallel: int = 1,
             device: str | None = None, progress: bool = True, command: str | None = None,
             max_minutes: float | None = None) -> GridSummary:
    """Train every unfinished cell and append its rows to ``out / results.csv``.

    Args:
        cells: from :func:`plan_cells`.
        settings: the recipe shared by every cell.
        out: results folder (created).
        parallel: cells trained side by side in worker processes (1: in this process).
        device: torch device (default: CUDA when available, else CPU).
        progress: show a progress bar over cells.
        command: the command line to record in ``out / runs.jsonl`` (default: ``sys.argv``).
        max_minutes: wall-clock budget of this call: once spent, cells still training are abandoned (workers
            stopped) and listed in ``summary.unfinished``; the next call with the same settings trains them.
    """
    from tqdm.auto import tqdm

    if parallel < 1:
        raise StateTrackingError(f"parallel must be at least 1, got {parallel}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULTS_FILE
    done = finished_cells(read_results(path), settings)
    summary = GridSummary(skipped=[c for c in cells if c in done])
    pending = [c for c in cells if c not in done]
    _record_call(out, settings, pending, parallel, command)
    jobs = [(cell, settings, device) for cell in pending]
    bar = tqdm(total=len(jobs), desc="state tracking", unit="model", disable=not progress, dynamic_ncols=True)
    deadline = None if max_minutes is None else time.monotonic() + 60 * max_minutes
    pool = None
    if parallel == 1:
        results: Iterable[Outcome] = _until(map(_work, jobs), deadline)
    else:
        workers = min(parallel, max(1, len(jobs)))
        pool = multiprocessing.get_context("spawn").Pool(workers, _init_worker, (workers,))
        results = _until(pool.imap_unordered(_work, jobs), deadline)
    try:
        for cell, rows, error in results:
            if rows is None:
                summary.failed[cell] = error
                bar.write(f"FAILED {cell.task} {cell.backbone} seed {cell.seed}:\n{error}")
            else:
                append_rows(path, rows)
                summary.ran.append(cell)
                scores = " ".join(f"{r['eval_length']}:{r['accuracy']:.3f}" for r in rows)
                bar.set_postfix_str(f"{cell.task} {cell.backbone} s{cell.seed} {scores}", refresh=False)
            bar.update(1)
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
            pool.join()
    summary.unfinished = [c for c in pending if c not in summary.ran and c not in summary.failed]
    if summary.unfinished:
        bar.write(f"time budget of {max_minutes} min spent: {len(summary.unfinished)} cell(s) left for the next call")
    return summary


def default_parallel() -> int:
    """Side-by-side workers when not asked: 8 on a GPU (one small model leaves most of it idle), else 1."""
    import torch

    return 8 if torch.cuda.is_available() else 1
