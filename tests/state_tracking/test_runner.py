"""The grid runner on the CPU with tiny models: rows appended per cell, finished cells skipped on a second call,
a partly written cell redone, a failing cell reported while the others finish, side-by-side workers, and the CLI."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tsfm.cli import main as tsfm_main
from tsfm.pipelines.state_tracking import train
from tsfm.pipelines.state_tracking.cli import main
from tsfm.pipelines.state_tracking.model import ModelSize
from tsfm.pipelines.state_tracking.runner import (
    Cell,
    StateTrackingError,
    finished_cells,
    plan_cells,
    read_results,
    run_grid,
)
from tsfm.pipelines.state_tracking.train import TrainSettings

SETTINGS = TrainSettings(steps=2, batch_size=4, train_length=8, eval_lengths=(8, 16), eval_sequences=4,
                         warmup_steps=1, size=ModelSize(d_model=8, n_layers=1, n_heads=1, chunk_size=8))
TINY_FLAGS = ["--steps", "2", "--batch-size", "4", "--train-length", "8", "--eval-lengths", "8,16",
              "--eval-sequences", "4", "--d-model", "8", "--layers", "1", "--heads", "1", "--quiet"]


def rows_of(out: Path) -> list[dict[str, str]]:
    return read_results(out / "results.csv")


def test_resume_skips_finished_cells_and_redoes_partial_ones(tmp_path: Path) -> None:
    cells = plan_cells(["parity", "anbn"], ["transformer"], [0, 1])
    first = run_grid(cells, SETTINGS, tmp_path, progress=False)
    assert first.ran == cells and not first.skipped and not first.failed
    rows = rows_of(tmp_path)
    assert len(rows) == len(cells) * 2
    assert {(r["task"], r["seed"], r["eval_length"]) for r in rows} == {
        (t, s, length) for t in ("parity", "anbn") for s in ("0", "1") for length in ("8", "16")}

    again = run_grid(cells, SETTINGS, tmp_path, progress=False)
    assert again.ran == [] and again.skipped == cells
    assert rows_of(tmp_path) == rows  # nothing appended

    # a cell with only one of its two lengths written (a stop mid-write) is trained again
    kept = [r for r in rows if not (r["task"] == "anbn" and r["seed"] == "1" and r["eval_length"] == "16")]
    with (tmp_path / "results.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(kept)
    third = run_grid(cells, SETTINGS, tmp_path, progress=False)
    assert third.ran == [Cell("anbn", "transformer", 1)]
    assert len(finished_cells(rows_of(tmp_path), SETTINGS)) == len(cells)

    # another recipe (more steps) is another set of rows beside the old ones
    longer = TrainSettings(**{**SETTINGS.__dict__, "steps": 3})
    fourth = run_grid(cells[:1], longer, tmp_path, progress=False)
    assert fourth.ran == cells[:1]
    assert sorted({r["steps"] for r in rows_of(tmp_path)}) == ["2", "3"]
    calls = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [c["cells"] for c in calls] == [4, 0, 1, 1] and calls[-1]["settings"]["steps"] == 3


def test_a_failing_cell_is_reported_and_the_others_finish(tmp_path: Path, monkeypatch) -> None:
    real = train.run_cell

    def flaky(cell, settings, device=None, **kwargs):
        if cell.task == "anbn":
            raise RuntimeError("kernel exploded")
        return real(cell, settings, device, **kwargs)

    monkeypatch.setattr(train, "run_cell", flaky)
    cells = plan_cells(["anbn", "parity"], ["transformer"], [0])
    summary = run_grid(cells, SETTINGS, tmp_path, progress=False)
    assert list(summary.failed) == [Cell("anbn", "transformer", 0)]
    assert "kernel exploded" in summary.failed[Cell("anbn", "transformer", 0)]
    assert summary.ran == [Cell("parity", "transformer", 0)]
    assert {r["task"] for r in rows_of(tmp_path)} == {"parity"}


@pytest.mark.slow
def test_side_by_side_workers_write_every_row(tmp_path: Path) -> None:
    cells = plan_cells(["parity", "majority"], ["transformer"], [0, 1])
    summary = run_grid(cells, SETTINGS, tmp_path, parallel=2, progress=False)
    assert sorted(summary.ran, key=str) == sorted(cells, key=str)
    assert finished_cells(rows_of(tmp_path), SETTINGS) == set(cells)
    assert len(rows_of(tmp_path)) == 8


def test_grid_is_seed_major() -> None:
    """So that a grid cut short by its time budget has whole seeds, every task x backbone in each."""
    cells = plan_cells(["parity", "s3"], ["transformer", "mamba2"], [0, 1])
    assert [c.seed for c in cells] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert cells[:2] == [Cell("parity", "transformer", 0), Cell("parity", "mamba2", 0)]


@pytest.mark.parametrize("parallel", [1, 2])
def test_a_spent_budget_leaves_cells_for_the_next_call(tmp_path: Path, parallel: int) -> None:
    cells = plan_cells(["parity"], ["transformer"], [0, 1])
    summary = run_grid(cells, SETTINGS, tmp_path, parallel=parallel, progress=False, max_minutes=0.0)
    assert summary.unfinished == cells and not summary.ran
    assert rows_of(tmp_path) == []
    assert run_grid(cells, SETTINGS, tmp_path, progress=False).ran == cells  # the next call trains them


def test_plan_refuses_unknown_names_before_compute() -> None:
    with pytest.raises(StateTrackingError, match="unknown task 'dyck'"):
        plan_cells(["dyck"], ["transformer"], [0])
    with pytest.raises(StateTrackingError, match="unknown backbone 'lstm'"):
        plan_cells(["parity"], ["lstm"], [0])
    with pytest.raises(StateTrackingError, match=r"xlstm\[a\]"):
        plan_cells(["parity"], ["xlstm[a]"], [0])
    with pytest.raises(StateTrackingError, match="listed twice: 0"):
        plan_cells(["parity"], ["transformer"], [0, 0])


def test_results_of_another_kind_are_refused(tmp_path: Path) -> None:
    (tmp_path / "results.csv").write_text("dataset,MASE\nm4,1.0\n")
    with pytest.raises(StateTrackingError, match="not a state-tracking results file"):
        run_grid(plan_cells(["parity"], ["transformer"], [0]), SETTINGS, tmp_path, progress=False)


def test_cli_run_then_report(tmp_path: Path, capsys) -> None:
    out = tmp_path / "grid"
    assert main(["run", "--tasks", "parity", "--backbones", "transformer", "--seeds", "0", "--out", str(out),
                 *TINY_FLAGS]) == 0
    assert "trained 1, skipped 0 finished, 0 failed" in capsys.readouterr().out
    assert main(["run", "--tasks", "parity", "--backbones", "transformer", "--seeds", "0", "--out", str(out),
                 *TINY_FLAGS]) == 0
    assert "trained 0, skipped 1 finished" in capsys.readouterr().out
    report = tmp_path / "reports" / "state_tracking.md"
    # through the top-level command: `tsfm tasks report`
    assert tsfm_main(["tasks", "report", "--results", str(out), "--out", str(report)]) == 0
    assert (tmp_path / "reports" / "state_tracking" / "parity_2.png").is_file()
    assert "| parity | `transformer` | 1 |" in report.read_text()


def test_cli_errors_are_one_line(tmp_path: Path, capsys) -> None:
    assert main(["run", "--backbones", "lstm", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: unknown backbone 'lstm'")
    assert tsfm_main(["tasks", "report", "--results", str(tmp_path / "none.csv")]) == 2
    assert "no such results file" in capsys.readouterr().err
    assert main(["run", "--seeds", "a,b", "--out", str(tmp_path)]) == 2  # argparse's own error
