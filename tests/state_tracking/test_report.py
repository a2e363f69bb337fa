"""The report on a small hand-written results CSV whose means, spreads and verdicts are known in advance."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tsfm.pipelines.state_tracking.report import (
    compare_with_seed_study,
    load_results,
    markdown_table,
    summarise,
    write_report,
)
from tsfm.pipelines.state_tracking.runner import StateTrackingError
from tsfm.pipelines.state_tracking.train import RESULT_COLUMNS

# (task, backbone) -> normalised accuracy per seed at lengths 128, 512, 2048
SCORES = {
    ("parity", "xlstm[1:1]"): [(1.0, 1.0, 1.0), (1.0, 1.0, 1.0), (1.0, 1.0, 0.994)],
    ("parity", "mamba2"): [(0.9, 0.30, 0.10), (0.8, 0.40, 0.20), (1.0, 0.20, 0.00)],
    ("parity", "gdn[neg_eigval]"): [(1.0, 0.8, 0.45), (1.0, 0.7, 0.50), (1.0, 0.9, 0.46)],
    ("s3", "xlstm[1:1]"): [(1.0, 0.9, 0.6), (1.0, 0.95, 0.5), (1.0, 0.85, 0.4)],
}
LENGTHS = (128, 512, 2048)


def write_csv(path: Path, steps: int = 1000, train_length: int = 128, scores=SCORES) -> Path:
    rows = []
    for (task, backbone), per_seed in scores.items():
        for seed, values in enumerate(per_seed):
            for length, value in zip(LENGTHS, values, strict=True):
                chance = 0.5 if task == "parity" else 1 / 6
                rows.append({"task": task, "backbone": backbone, "seed": seed, "train_length": train_length,
                             "eval_length": length, "accuracy": chance + value * (1 - chance),
                             "normalised_accuracy": value, "final_accuracy": value, "chance": chance, "steps": steps,
                             "seconds": 36.0, "train_loss": 0.1, "parameters": 1000, "device": "NVIDIA H200"})
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=RESULT_COLUMNS)
        if fh.tell() == 0:
            writer.writeheader()
        writer.writerows(rows)
    return path


def test_summary_has_mean_and_spread_over_seeds(tmp_path: Path) -> None:
    summary = summarise(load_results([write_csv(tmp_path / "results.csv")])).set_index(
        ["task", "backbone", "eval_length"])
    cell = summary.loc[("parity", "mamba2", 512)]
    assert cell["mean"] == pytest.approx(0.3) and cell["std"] == pytest.approx(0.1) and cell["seeds"] == 3
    table = markdown_table(summarise(load_results([tmp_path])))
    assert table.splitlines()[0] == "| task | backbone | seeds | L = 128 | L = 512 | L = 2,048 |"
    assert "| parity | `mamba2` | 3 | 0.900 ± 0.100 | 0.300 ± 0.100 | 0.100 ± 0.100 |" in table
    assert table.index("| parity |") < table.index("| s3 |")  # the tasks' own order


def test_comparison_verdicts(tmp_path: Path) -> None:
    text = compare_with_seed_study(load_results([write_csv(tmp_path / "results.csv")]))
    lines = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()[2:]}
    assert "| agrees" in lines["xLSTM [1:1] keeps parity at 1.000 up to length 2,048"]  # 0.998 >= 0.99
    assert "| differs" in lines["xLSTM [1:1] keeps S3 at 1.000 up to length 2,048"]  # 0.5 at 2,048
    mamba = lines["Mamba-2 stays at or below 0.352 on parity beyond the training length"]
    assert "| 512, 2,048 |" in mamba and "| agrees" in mamba  # 0.3 and 0.1; length 128 (0.9) is in distribution
    assert "2,048: 0.470 ± 0.026 | agrees" in lines["GDN [-1,1] drops to 0.47 on parity at length 2,048"]


def test_comparison_says_what_was_not_run(tmp_path: Path) -> None:
    only_s3 = {k: v for k, v in SCORES.items() if k[0] == "s3"}
    text = compare_with_seed_study(load_results([write_csv(tmp_path / "results.csv", scores=only_s3)]))
    assert "| Mamba-2 stays at or below 0.352 on parity beyond the training length | – | not run | – |" in text


def test_write_report_makes_markdown_and_plots(tmp_path: Path) -> None:
    results = tmp_path / "grid"
    write_csv(results / "results.csv")
    (results / "runs.jsonl").write_text('{"command": "python -m tsfm.pipelines.state_tracking run --out grid"}\n')
    out = tmp_path / "reports" / "state_tracking.md"
    written = write_report([results], out, notes=["Why the numbers differ."])
    assert written == [out, out.with_suffix("") / "parity_1000.png", out.with_suffix("") / "s3_1000.png"]
    for png in written[1:]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = out.read_text()
    assert "Trained on sequences of length <= 128 for 1,000 steps" in text
    assert "Rows: 36 from 12 models; device: NVIDIA H200; 0.12 model-hours" in text
    assert "Why the numbers differ." in text
    assert "![parity_1000](state_tracking/parity_1000.png)" in text
    assert "python -m tsfm.pipelines.state_tracking run --out grid" in text
    for heading in ("## 1,000 training steps", "### Normalised accuracy", "### Raw accuracy",
                    "### Accuracy of the last position", "### Comparison with the seed study"):
        assert heading in text


def test_every_recipe_gets_its_section_and_plots(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "results.csv", steps=100)
    write_csv(path, steps=1000, scores={("parity", "mamba2"): SCORES[("parity", "mamba2")]})
    out = tmp_path / "report.md"
    written = write_report([path], out)
    assert [p.name for p in written[1:]] == ["parity_100.png", "s3_100.png", "parity_1000.png"]
    text = out.read_text()
    assert text.index("## 100 training steps") < text.index("## 1,000 training steps")
    assert text.count("### Comparison with the seed study") == 2
    only = write_report([path], tmp_path / "only.md", steps=1000)
    assert [p.name for p in only[1:]] == ["parity_1000.png"]
    assert "## 100 training steps" not in (tmp_path / "only.md").read_text()


def test_one_recipe_is_reported(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "results.csv", steps=100)
    write_csv(path, steps=1000, scores={("parity", "mamba2"): SCORES[("parity", "mamba2")]})
    assert set(load_results([path])["steps"]) == {1000}  # the longest training by default
    assert len(load_results([path], steps=100)) == 36
    with pytest.raises(StateTrackingError, match=r"no rows with steps=5; the files hold steps \[100, 1000\]"):
        load_results([path], steps=5)
    write_csv(path, steps=1000, train_length=64)
    with pytest.raises(StateTrackingError, match="mix training lengths"):
        load_results([path])


def test_missing_or_empty_results_are_refused(tmp_path: Path) -> None:
    with pytest.raises(StateTrackingError, match="no such results file"):
        load_results([tmp_path / "absent.csv"])
    (tmp_path / "results.csv").write_text(",".join(RESULT_COLUMNS) + "\n")
    with pytest.raises(StateTrackingError, match="no result rows"):
        load_results([tmp_path])
