"""``scripts/plot_benchmark_windows.py`` draws a configuration's test windows and scores each model on them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsfm.pipelines.data.gift_format import write_dataset
from tsfm.pipelines.evaluate.configs import BENCHMARK_FILE

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three clean daily cycles of hourly data: Seasonal Naive is nearly exact there, Naive is not."""
    root = tmp_path_factory.mktemp("bench")
    rng = np.random.default_rng(0)
    t = np.arange(400)
    entries = [
        {"item_id": f"s{i}", "start": pd.Timestamp("2020-01-01"), "freq": "H",
         "target": (10 + 3 * np.sin(2 * np.pi * t / 24) + 0.05 * rng.standard_normal(400)).astype(np.float32)}
        for i in range(3)
    ]
    write_dataset(root / "synth" / "H", entries)
    listing = {"configurations": [{"dataset": "synth/H", "term": "short", "key": "synth/H/short"}]}
    (root / BENCHMARK_FILE).write_text(json.dumps(listing))
    return root


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_benchmark_windows.py"), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


def test_draws_the_windows_and_scores_each_model(bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "windows.png"
    done = _run("synth/H/short", "seasonal_naive", "naive", "--benchmark", str(bench), "--out", str(out),
                "--windows", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    maes = _per_window(done.stdout, "MAE")
    assert set(maes) == {"seasonal_naive", "naive"} and all(len(v) == 2 for v in maes.values())
    assert max(maes["seasonal_naive"]) < 0.2 < min(maes["naive"])


def test_worst_ranks_every_window_and_its_mase_is_gift_evals(bench: Path, tmp_path: Path) -> None:
    """Over all windows, the mean of the printed per-window MASE is what `tsfm evaluate` reports (MASE[0.5]), and
    --worst lists the windows by how much the first model loses to the last."""
    from tsfm.pipelines.evaluate import evaluate

    done = _run("synth/H/short", "naive", "seasonal_naive", "--benchmark", str(bench), "--out",
                str(tmp_path / "w.png"), "--windows", "50", "--worst")
    assert done.returncode == 0, done.stderr[-3000:]
    mases = _per_window(done.stdout, "MASE")
    excess = np.array(mases["naive"]) - np.array(mases["seasonal_naive"])
    assert len(excess) == 3 and np.all(np.diff(excess) <= 0)
    reported = evaluate(["seasonal_naive"], bench, progress=False)["seasonal_naive"]["rows"].iloc[0]
    assert np.mean(mases["seasonal_naive"]) == pytest.approx(reported["eval_metrics/MASE[0.5]"], rel=1e-3)


def _per_window(printed: str, metric: str) -> dict[str, list[float]]:
    return {m: [float(v) for v in values.split()]
            for m, values in re.findall(rf"^(\w+): {metric} per window (.+)$", printed, flags=re.M)}


def test_bad_configuration_and_window_count_are_refused(bench: Path, tmp_path: Path) -> None:
    unknown = _run("synth/H/long", "naive", "--benchmark", str(bench), "--out", str(tmp_path / "a.png"))
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert "unknown configuration 'synth/H/long'" in unknown.stderr
    zero = _run("synth/H/short", "naive", "--benchmark", str(bench), "--out", str(tmp_path / "b.png"), "--windows", "0")
    assert zero.returncode == 2 and "--windows must be at least 1" in zero.stderr
    alone = _run("synth/H/short", "naive", "--benchmark", str(bench), "--out", str(tmp_path / "c.png"), "--worst")
    assert alone.returncode == 2 and "--worst compares the first model with the last" in alone.stderr
    assert not any((tmp_path / name).exists() for name in ("a.png", "b.png", "c.png"))
