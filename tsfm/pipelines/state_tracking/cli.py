"""Command line of the state-tracking suite: ``run`` (train the grid, append to a CSV) and ``report``.

:func:`register` adds them as ``tasks run|report`` to any argparse sub-parser set (the top-level ``tsfm`` command
uses it); :func:`main` is ``python -m tsfm.pipelines.state_tracking run|report``. Each command returns an exit
code and turns bad input into one line ``error: ...`` with exit code 2, so it behaves the same under either
entry point. torch, pandas and matplotlib are imported inside the commands: ``--help`` stays instant.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tsfm.cli import split_specs

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_BACKBONES = "mamba2,gdn,gdn[neg_eigval],xlstm[1:0],xlstm[0:1],xlstm[1:1],transformer"


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 0,1,2, got {text!r}") from None


def _names(text: str) -> list[str]:
    """Comma-separated names or backbone specs; a comma inside brackets belongs to its spec (``xlstm[1:0,conv]``)."""
    return split_specs(text)


def command_line() -> str:
    """The command as typed, for the record kept beside the results."""
    argv = list(sys.argv)
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if argv and spec is not None:  # python -m PACKAGE: name the package that was run
        argv[:1] = ["python", "-m", spec.name.removesuffix(".__main__")]
    elif argv:
        argv[0] = Path(argv[0]).name
    return shlex.join(argv)


def add_commands(subparsers: Any) -> None:
    """Add ``run`` and ``report`` to ``subparsers`` (an ``add_subparsers()`` result)."""
    run = subparsers.add_parser("run", help="train the grid task x backbone x seed; append rows to OUT/results.csv",
                                description="Train one token classifier per task, backbone and seed at lengths <= "
                                "--train-length, score it at --eval-lengths, append one row per length to "
                                "OUT/results.csv. Cells already there (same steps and train length) are skipped.")
    run.add_argument("--tasks", type=_names, default=None,
                     help="comma-separated: parity, z5, s3, majority, anbn, anbncn (default: all)")
    run.add_argument("--backbones", type=_names, default=_names(DEFAULT_BACKBONES),
                     help=f"comma-separated backbone specs (default: {DEFAULT_BACKBONES})")
    run.add_argument("--seeds", type=_ints, default=[0, 1, 2], help="comma-separated seeds (default: 0,1,2)")
    run.add_argument("--steps", type=int, default=1000, help="optimizer steps per model (default: 1000)")
    run.add_argument("--out", type=Path, required=True, help="results folder (results.csv, runs.jsonl)")
    run.add_argument("--batch-size", type=int, default=64, help="sequences per step (default: 64)")
    run.add_argument("--train-length", type=int, default=128, help="longest training sequence (default: 128)")
    run.add_argument("--eval-lengths", type=_ints, default=[128, 512, 2048],
                     help="comma-separated evaluation lengths (default: 128,512,2048)")
    run.add_argument("--eval-sequences", type=int, default=256, help="sequences per evaluation length (default: 256)")
    run.add_argument("--learning-rate", type=float, default=3e-3, help="peak AdamW learning rate (default: 3e-3)")
    run.add_argument("--d-model", type=int, default=64, help="width of every model (default: 64)")
    run.add_argument("--layers", type=int, default=2, help="blocks of every model (default: 2)")
    run.add_argument("--heads", type=int, default=2, help="heads of every model (default: 2)")
    run.add_argument("--parallel", type=int, default=None,
                     help="models trained side by side in worker processes (default: 8 on a GPU, else 1)")
    run.add_argument("--max-minutes", type=float, default=None,
                     help="wall-clock budget: stop when spent (cells in flight are lost; rerun to continue)")
    run.add_argument("--device", default=None, help="torch device (default: cuda when available, else cpu)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.set_defaults(run=run_command)

    report = subparsers.add_parser("report", help="tables, plots and the seed-study comparison from results CSVs",
                                   description="Write the markdown report and one plot per task (accuracy against "
                                   "length) under the report's stem folder.")
    report.add_argument("--results", type=Path, nargs="+", required=True, metavar="PATH",
                        help="results.csv files or folders holding them")
    report.add_argument("--out", type=Path, default=Path("reports/state_tracking.md"),
                        help="markdown file; plots go to its stem folder (default: reports/state_tracking.md)")
    report.add_argument("--steps", type=int, default=None,
                        help="report only this recipe (default: every number of steps in the files, one section each)")
    report.add_argument("--note", action="append", default=[], metavar="TEXT",
                        help="a paragraph under the title (repeatable)")
    report.add_argument("--notes-file", type=Path, default=None, metavar="MD",
                        help="markdown printed under the title, after any --note (the interpretation of the numbers)")
    report.set_defaults(run=report_command)


def register(subparsers: Any) -> None:
    """Expose the suite as ``tasks run|report`` in a parent command's sub-parsers (the ``tsfm`` command)."""
    parser = subparsers.add_parser("tasks", help="state-tracking suite: synthetic length-generalisation tasks",
                                   description="Synthetic state-tracking tasks on every backbone (issue 13).")
    add_commands(parser.add_subparsers(dest="tasks_command", metavar="ACTION", required=True))


def run_command(args: argparse.Namespace) -> int:
    from tsfm.pipelines.state_tracking.model import ModelSize
    from tsfm.pipelines.state_tracking.runner import StateTrackingError, default_parallel, plan_cells, run_grid
    from tsfm.pipelines.state_tracking.tasks import TASKS
    from tsfm.pipelines.state_tracking.train import TrainSettings

    try:
        settings = TrainSettings(
            steps=args.steps, batch_size=args.batch_size, train_length=args.train_length,
            eval_lengths=tuple(args.eval_lengths), eval_sequences=args.eval_sequences,
            learning_rate=args.learning_rate, min_learning_rate=args.learning_rate / 10,
            warmup_steps=min(100, max(1, args.steps // 10)),
            size=ModelSize(d_model=args.d_model, n_layers=args.layers, n_heads=args.heads))
        cells = plan_cells(args.tasks or list(TASKS), args.backbones, args.seeds)
        summary = run_grid(cells, settings, args.out, parallel=args.parallel or default_parallel(),
                           device=args.device, progress=not args.quiet, command=command_line(),
                           max_minutes=args.max_minutes)
    except (StateTrackingError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"trained {len(summary.ran)}, skipped {len(summary.skipped)} finished, {len(summary.failed)} failed, "
          f"{len(summary.unfinished)} left for a later call; results in {args.out / 'results.csv'}")
    for cell in summary.failed:
        print(f"failed: {cell.task} {cell.backbone} seed {cell.seed}", file=sys.stderr)
    return EXIT_FAILED if summary.failed else EXIT_OK


def report_command(args: argparse.Namespace) -> int:
    from tsfm.pipelines.state_tracking.report import write_report
    from tsfm.pipelines.state_tracking.runner import StateTrackingError

    try:
        notes = list(args.note)
        if args.notes_file is not None:
            if not args.notes_file.is_file():
                raise StateTrackingError(f"--notes-file {args.notes_file}: no such file")
            notes.append(args.notes_file.read_text().strip())
        written = write_report(args.results, args.out, steps=args.steps, notes=notes, command=command_line())
    except StateTrackingError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tsfm.pipelines.state_tracking run|report ...``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m tsfm.pipelines.state_tracking",
                                     description="Synthetic state-tracking tasks on every backbone.")
    add_commands(parser.add_subparsers(dest="tasks_command", metavar="ACTION", required=True))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help and bad arguments
        return int(exit_.code or 0)
    return args.run(args)
