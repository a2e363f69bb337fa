"""Reports: Markdown tables, geometric means and win rates from known numbers; PNGs; the ``tsfm report`` command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("gluonts")
pytest.importorskip("statsforecast")

from tsfm.cli import main
from tsfm.pipelines.data.gift_eval import BENCHMARK_FILE
from tsfm.pipelines.data.gift_format import write_dataset
from tsfm.pipelines.evaluate import CRPS, MASE, RESULT_COLUMNS, EvaluationError
from tsfm.pipelines.report import model_order, win_rates, write_report

PNG = b"\x89PNG"

# (dataset, model, MASE, CRPS): "better" halves Seasonal Naive's scores, "worse" doubles them on the long term
KNOWN = [
    ("a/H/short", "seasonal_naive", 2.0, 0.2),
    ("b/D/short", "seasonal_naive", 1.0, 0.1),
    ("a/H/long", "seasonal_naive", 4.0, 0.4),
    ("a/H/short", "naive", 4.0, 0.4),
    ("b/D/short", "naive", 1.0, 0.1),
    ("a/H/long", "naive", 8.0, 0.8),
    ("a/H/short", "better", 1.0, 0.1),
    ("b/D/short", "better", 0.5, 0.05),
    ("a/H/long", "better", 8.0, 0.8),
]


def write_results(root: Path, rows: list[tuple[str, str, float, float]]) -> Path:
    """``root/<model>/all_results.csv`` (GIFT-Eval columns) and a ``run.json`` per model."""
    frame = pd.DataFrame(rows, columns=["dataset", "model", MASE, CRPS])
    for column in RESULT_COLUMNS:
        if column not in frame:
            frame[column] = "Energy" if column == "domain" else 1 if column == "num_variates" else 0.5
    for model, part in frame.groupby("model"):
        (root / str(model)).mkdir(parents=True)
        part[list(RESULT_COLUMNS)].to_csv(root / str(model) / "all_results.csv", index=False)
        run = {"model": model, "kind": "baseline", "configurations": len(part), "wall_seconds": 1.5,
               "benchmark": "bench", "benchmark_build_seconds": 7.3, "command": f"tsfm evaluate --model {model}",
               "settings": {"history": "full"}, "machine": {"cpus": 2}}
        (root / str(model) / "run.json").write_text(json.dumps(run))
    return root


def test_win_rates_known_numbers() -> None:
    frame = pd.DataFrame(KNOWN, columns=["dataset", "model", MASE, CRPS])
    rates = win_rates(frame, MASE, ["naive", "seasonal_naive"])
    assert list(rates.index) == ["naive", "seasonal_naive", "better"]
    assert rates.loc["better", "seasonal_naive"] == pytest.approx(2 / 3)  # wins a/H/short and b/D/short
    assert rates.loc["better", "naive"] == pytest.approx(2.5 / 3)  # a tie on a/H/long counts half
    assert rates.loc["seasonal_naive", "naive"] == pytest.approx(2.5 / 3)
    assert np.isnan(rates.loc["naive", "naive"])
    assert model_order(["zeta", "auto_arima", "naive", "alpha"]) == ["naive", "auto_arima", "alpha", "zeta"]


def test_report_renders_markdown_and_pngs(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", KNOWN)
    written = write_report([results], tmp_path / "out", name="demo")
    assert [p.name for p in written] == ["demo.md", "demo_normalised.csv", "demo_normalised.png"]
    assert (tmp_path / "out" / "demo_normalised.png").read_bytes()[:4] == PNG
    text = (tmp_path / "out" / "demo.md").read_text()
    for key in ("a/H/short", "b/D/short", "a/H/long"):
        assert f"`{key}`" in text
    # better: normalised MASE 0.5, 0.5, 2.0 -> geometric mean 0.794; naive: 2, 1, 2 -> 1.587
    assert "| better | 3 | 0.794 | 0.794 |" in text
    assert "| naive | 3 | 1.587 | 1.587 |" in text
    assert "**geometric mean**" in text
    # per frequency, the finest first: better is 0.5 and 2.0 on H (geometric mean 1), 0.5 on D
    assert "| model | H | D |" in text
    assert "| better | 1.000 / 1.000 (2) | 0.500 / 0.500 (1) |" in text
    assert "| better | 83% / 83% | 67% / 67% |" in text
    assert "tsfm evaluate --model naive" in text and "7.3 s" in text
    norm = pd.read_csv(tmp_path / "out" / "demo_normalised.csv")
    assert set(norm.columns) == {"dataset", "model", "term", "MASE", "CRPS"}


def test_report_pairs_models_against_a_reference(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", KNOWN)
    write_report([results], tmp_path / "out", name="demo", reference="naive")
    text = (tmp_path / "out" / "demo.md").read_text()
    assert "## Paired against `naive`" in text
    # better / naive per configuration: 0.25, 0.5, 1.0 -> geometric mean 0.5 on both metrics
    assert "| better | 0.500 [" in text and "| seasonal_naive | 0.630 [" in text
    assert "| naive | 0.5" not in text  # the reference is not paired with itself
    with pytest.raises(EvaluationError, match="'nope' has no results"):
        write_report([results], tmp_path / "out2", reference="nope")
    assert not (tmp_path / "out2").exists()


def test_report_needs_seasonal_naive(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", [r for r in KNOWN if r[1] != "seasonal_naive"])
    with pytest.raises(EvaluationError, match="seasonal_naive"):
        write_report([results], tmp_path / "out")


def _tiny_benchmark(root: Path) -> Path:
    t = np.arange(200)
    entries = [
        {"item_id": f"s{i}", "start": pd.Timestamp("2020-01-01"), "freq": "H",
         "target": (5 + i + np.sin(2 * np.pi * t / 24) + 0.1 * np.cos(t / 7)).astype(np.float32)}
        for i in range(2)
    ]
    write_dataset(root / "tiny" / "H", entries)
    listing = {"configurations": [{"dataset": "tiny/H", "term": "short", "key": "tiny/H/short"}]}
    (root / BENCHMARK_FILE).write_text(json.dumps(listing))
    return root


def test_cli_evaluate_then_report_with_examples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = _tiny_benchmark(tmp_path / "bench")
    results = tmp_path / "results"
    argv = ["evaluate", "--model", "seasonal_naive", "naive", "--benchmark", str(bench), "--out", str(results)]
    assert main([*argv, "--quiet"]) == 0
    out = tmp_path / "reports"
    code = main(["report", "--results", str(results), "--out", str(out), "--name", "tiny", "--benchmark", str(bench),
                 "--example-models", "naive"])
    assert code == 0
    assert (out / "tiny_examples.png").read_bytes()[:4] == PNG
    text = (out / "tiny.md").read_text()
    assert "`tiny/H/short`" in text and "tiny_examples.png" in text
    assert "wrote" in capsys.readouterr().out


def test_cli_report_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--results", str(tmp_path / "none"), "--out", str(tmp_path)]) == 2
    assert "no all_results.csv" in capsys.readouterr().err
    results = write_results(tmp_path / "results", [r for r in KNOWN if r[1] != "seasonal_naive"])
    assert main(["report", "--results", str(results), "--out", str(tmp_path)]) == 2
    assert "normaliser" in capsys.readouterr().err
    assert main(["report", "--sweep", str(tmp_path / "results.csv"), "--reference", "default"]) == 2
    assert "--reference apply to --results" in capsys.readouterr().err


def test_published_values_say_which_configurations_share_the_data() -> None:
    from tsfm.pipelines.report import _anchors_section

    frame = pd.DataFrame([("m4_hourly/H/short", "seasonal_naive", 1.19321, 0.0376),
                          ("ett1/H/short", "seasonal_naive", 1.001, 0.2539)], columns=["dataset", "model", MASE, CRPS])
    text = "\n".join(_anchors_section(frame))
    assert "| `m4_hourly/H/short` | same | seasonal_naive | 1.193 / 0.038 | 1.193 / 0.038 |" in text
    assert "| `ett1/H/short` | another version | seasonal_naive |" in text
    assert "our ETT files are another version" in text
    assert _anchors_section(frame.iloc[0:0]) == []
