"""The scaling sweep end to end on the CPU: tiny models, a few steps, one benchmark configuration; resume of an
interrupted run, skip of finished runs, and clear errors before compute."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import types
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
import pytest

from tsfm.cli import main
from tsfm.pipelines.data.build import build_benchmark
from tsfm.pipelines.data.gift_format import write_dataset
from tsfm.pipelines.data.paths import raw_dir
from tsfm.pipelines.evaluate import select_configs
from tsfm.pipelines.sweep import (
    READ_ALONE,
    RECIPES,
    SHORT_CONTEXTS,
    Recipe,
    SweepError,
    SweepRun,
    SweepSettings,
    _child_env,
    _configs,
    _score_read_alone,
    append_rows,
    check_out_folder,
    plan_runs,
    run_sweep,
    score_checkpoint,
)
from tsfm.pipelines.train import train

REPO = Path(__file__).resolve().parents[1]
NORMALISER = REPO / "reports/results/seasonal_naive/all_results.csv"
TINY = {"d_model": 32, "n_layers": 2, "n_heads": 2, "chunk_size": 16}


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory) -> Path:
    if not (raw_dir() / "m4_hourly_train.csv").is_file():
        pytest.skip(f"raw data not found in {raw_dir()} (set TSFM_SHARED_DIR to the shared folder holding data/raw)")
    root = tmp_path_factory.mktemp("bench")
    build_benchmark(root, datasets=["m4_hourly"], progress=False)
    return root


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    entries = [{"item_id": f"s{i}", "start": pd.Timestamp("2020-01-01"), "freq": "H",
                "target": (np.sin(np.arange(600) / rng.uniform(2, 9)) * 10 + 50).astype(np.float32)}
               for i in range(40)]
    write_dataset(root / "sines", entries)
    return root


def settings(out: Path, corpus: Path, benchmark: Path, **changes) -> SweepSettings:
    recipes = {"1M": Recipe(batch_size=8, learning_rate=1e-3, tokens=8 * 10 * 6),
               "3M": Recipe(batch_size=8, learning_rate=1e-3, tokens=8 * 10 * 4)}
    return SweepSettings(out=out, real_data=corpus, benchmark=benchmark, normaliser=NORMALISER, context_length=256,
                         horizon_patches=2, synthetic_share=0.0, recipes=recipes, model_changes=TINY,
                         configs=["m4_hourly/H/short"], **changes)


class _StopAt(L.Callback):
    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step >= 2:
            trainer.should_stop = True


def test_tiny_sweep_resumes_an_interrupted_run_and_skips_finished_ones(tmp_path, corpus, benchmark):
    sweep = settings(tmp_path / "sweep", corpus, benchmark)
    runs = plan_runs(["xlstm[1:1]", "mamba2"], ["3M", "1M"])
    assert [r.name for r in runs] == ["xlstm_1_1-1M-s0", "mamba2-1M-s0", "xlstm_1_1-3M-s0", "mamba2-3M-s0"]
    # An interrupted run: two of its six steps done, then the "machine" went away.
    model_config, train_config = _configs(runs[0], sweep)
    from tsfm.pipelines.data.corpus import load_corpus

    real, validation = load_corpus(corpus)
    train(model_config, train_config, sweep.out / "runs" / runs[0].name, real=real, validation=validation,
          callbacks=[_StopAt()], progress=False)
    finished = run_sweep(runs, sweep, parallel=1, progress=False)
    assert finished == [r.name for r in runs]
    results = pd.read_csv(sweep.out / "results.csv")
    # one row per run, configuration and decoding: the same weights scored masked and autoregressive
    assert len(results) == 8 and set(results["dataset"]) == {"m4_hourly/H/short"}
    assert results.groupby("run")["decoding"].apply(sorted).tolist() == [["autoregressive", "masked"]] * 4
    per_run = results.drop_duplicates("run")
    assert (per_run["steps"] == [6, 6, 4, 4]).all()
    assert results["MASE_normalised"].gt(0).all() and results["CRPS_normalised"].gt(0).all()
    assert (results["short_contexts"] == SHORT_CONTEXTS).all()  # scored as read_context reads (the report's key)
    assert per_run["tokens_seen"].tolist() == [6 * 8 * 10, 6 * 8 * 10, 4 * 8 * 10, 4 * 8 * 10]
    config = json.loads((sweep.out / "runs" / runs[0].name / "model" / "config.json").read_text())["model"]
    assert config["horizon_embedding"] is True  # the pretraining recipe's
    first_call, second_call = (pd.read_csv(f) for f in
                               sorted((sweep.out / "runs" / runs[0].name).glob("logs/version_*/metrics.csv")))
    assert first_call["step"].max() < 2 <= second_call["step"].min()  # resumed where it stopped, not from 0
    # A second call finds everything done: nothing is trained, the file is untouched.
    before = (sweep.out / "results.csv").read_bytes()
    assert run_sweep(runs, sweep, parallel=1, progress=False) == []
    assert (sweep.out / "results.csv").read_bytes() == before


def test_side_by_side_runs_write_the_same_rows(tmp_path, corpus, benchmark):
    sweep = settings(tmp_path / "sweep", corpus, benchmark)
    runs = plan_runs(["xlstm[1:1]", "mamba2"], ["1M"])
    assert sorted(run_sweep(runs, sweep, parallel=2, progress=False)) == sorted(r.name for r in runs)
    results = pd.read_csv(sweep.out / "results.csv")
    assert sorted(results["run"]) == sorted(r.name for r in runs for _ in sweep.decodings)


def test_read_alone_rows_rescore_only_the_short_configurations(tmp_path, corpus, benchmark):
    """With ``read_alone_rows`` every run also gets the rows of the earlier reading (short contexts read alone):
    ``m4_hourly``'s contexts are shorter than the trained window, so its rows are scored again and differ; a
    configuration whose contexts fill the window keeps the padded rows (nothing to read or skip), unscored."""
    sweep = settings(tmp_path / "sweep", corpus, benchmark, read_alone_rows=True)
    run_sweep(plan_runs(["mamba2"], ["1M"]), sweep, parallel=1, progress=False)
    results = pd.read_csv(sweep.out / "results.csv")
    assert sorted(zip(results["decoding"], results["short_contexts"], strict=True)) == sorted(
        (d, c) for d in ("masked", "autoregressive") for c in (SHORT_CONTEXTS, READ_ALONE))
    for _, pair in results.groupby("decoding"):
        padded, alone = (pair.loc[pair["short_contexts"] == c, "MASE_normalised"].item()
                         for c in (SHORT_CONTEXTS, READ_ALONE))
        assert padded != alone
    run_dir = sweep.out / "runs" / "mamba2-1M-s0"
    config = json.loads((run_dir / "model-masked-alone" / "config.json").read_text())["model"]
    assert config["pad_short_contexts"] is False and config["decoding"] == "masked"
    padded_rows = [{"dataset": "m4_hourly/H/short", "MASE_normalised": 1.5}]
    kept = _score_read_alone(run_dir / "model", tmp_path / "unused", "masked", padded_rows, "x", sweep,
                             context_length=1)  # every context fills a one-step window
    assert kept == padded_rows and not (tmp_path / "unused").exists()


def test_bad_requests_fail_before_compute(tmp_path, corpus, benchmark):
    with pytest.raises(SweepError, match="unknown backbone"):
        plan_runs(["nope"], ["1M"])
    with pytest.raises(SweepError, match="unknown preset"):
        plan_runs(["mamba2"], ["7M"])
    sweep = settings(tmp_path / "sweep", corpus, benchmark)
    tiny_budget = dataclasses.replace(sweep, recipes={"1M": Recipe(batch_size=8, learning_rate=1e-3, tokens=10)})
    with pytest.raises(SweepError, match="does not fit one step"):
        run_sweep(plan_runs(["mamba2"], ["1M"]), tiny_budget)
    assert not (tmp_path / "sweep" / "runs").exists()
    with pytest.raises(SweepError, match="decodings must be some of"):
        run_sweep(plan_runs(["mamba2"], ["1M"]), dataclasses.replace(sweep, decodings=("greedy",)))
    check_out_folder(sweep)  # the folder is this sweep's (the refused requests above did not claim it)
    other = dataclasses.replace(sweep, horizon_patches=3)
    with pytest.raises(SweepError, match="another sweep"):
        run_sweep(plan_runs(["mamba2"], ["1M"]), other)
    assert json.loads((tmp_path / "sweep" / "sweep.json").read_text())["horizon_patches"] == 2


def test_a_folder_refuses_another_token_budget_and_a_failed_request_does_not_claim_it(tmp_path, corpus, benchmark):
    sweep = settings(tmp_path / "sweep", corpus, benchmark)
    too_small = dataclasses.replace(sweep, recipes={**sweep.recipes, "1M": Recipe(batch_size=8, learning_rate=1e-3,
                                                                                   tokens=10)})
    with pytest.raises(SweepError, match="does not fit one step"):
        run_sweep(plan_runs(["mamba2"], ["1M"]), too_small)
    assert not (tmp_path / "sweep").exists()  # the refused budget left no marker behind
    check_out_folder(sweep)
    four_times = dataclasses.replace(sweep, recipes={**sweep.recipes, "1M": Recipe(batch_size=8, learning_rate=1e-3,
                                                                                    tokens=4 * 8 * 10 * 6)})
    with pytest.raises(SweepError, match=r"another sweep's results \(different recipes \(1M\)\)"):
        run_sweep(plan_runs(["mamba2"], ["1M"]), four_times)


def test_a_marker_written_before_recipes_were_recorded_stands_for_the_recipe_table(tmp_path, corpus, benchmark):
    sweep = dataclasses.replace(settings(tmp_path / "sweep", corpus, benchmark), recipes=dict(RECIPES))
    check_out_folder(sweep)
    marker = tmp_path / "sweep" / "sweep.json"
    old = {k: v for k, v in json.loads(marker.read_text()).items() if k != "recipes"}
    marker.write_text(json.dumps(old))
    check_out_folder(sweep)  # the same sweep: accepted, and the marker now records the recipes
    assert json.loads(marker.read_text())["recipes"]["1M"]["tokens"] == RECIPES["1M"].tokens
    marker.write_text(json.dumps(old))
    doubled = dataclasses.replace(sweep, recipes={**RECIPES, "1M": dataclasses.replace(RECIPES["1M"], tokens=24e6)})
    with pytest.raises(SweepError, match=r"recipes \(1M\)"):
        check_out_folder(doubled)


def test_a_data_parallel_sweep_writes_each_row_once_and_matches_one_device(tmp_path, corpus, benchmark):
    """Both processes of a 2-device sweep go through its loop; rank 0 alone scores and appends, and the rows equal
    those of the one-device sweep (the batch is global, so the training is the same)."""
    one = run_sweep(plan_runs(["mamba2"], ["1M"]), settings(tmp_path / "one", corpus, benchmark), progress=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, str(REPO / "tests" / "_ddp_sweep.py"), str(tmp_path / "two"), str(corpus),
            str(benchmark), "2"]
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    a, b = pd.read_csv(tmp_path / "one" / "results.csv"), pd.read_csv(tmp_path / "two" / "results.csv")
    assert one == ["mamba2-1M-s0"] and len(b) == len(a) == 2  # two decodings
    assert b["device"].tolist() == ["2 x cpu"] * 2 and b["steps"].tolist() == a["steps"].tolist()
    for column in ("train_loss", "val_loss", "MASE_normalised"):
        np.testing.assert_allclose(b[column].to_numpy(), a[column].to_numpy(), rtol=1e-4)


def test_sweep_runs_get_the_devices_and_bad_splits_fail_before_compute(tmp_path):
    """``devices`` reaches every run's TrainConfig (the recipe's batch stays global); a batch the devices cannot
    share, or data-parallel runs side by side, are refused before any training."""
    sweep = SweepSettings(out=tmp_path / "sweep", real_data=None, benchmark=tmp_path, normaliser=NORMALISER,
                          context_length=256, horizon_patches=2,
                          recipes={"1M": Recipe(batch_size=8, learning_rate=1e-3, tokens=8 * 10 * 6)},
                          model_changes=TINY, devices=2)
    _, train_config = _configs(SweepRun("mamba2", "1M"), sweep)
    assert train_config.devices == 2 and train_config.batch_size == 8 and not train_config.compile
    assert _configs(SweepRun("mamba2", "1M"), dataclasses.replace(sweep, compile=True))[1].compile
    with pytest.raises(SweepError, match="do not combine"):
        run_sweep(plan_runs(["mamba2"], ["1M"]), sweep, parallel=2)
    with pytest.raises(ValueError, match=r"batch_size \(8\) must be divisible by devices \(3\)"):
        run_sweep(plan_runs(["mamba2"], ["1M"]), dataclasses.replace(sweep, devices=3))
    assert not (tmp_path / "sweep" / "runs").exists()


def test_cli_sweep_reports_bad_input(tmp_path, capsys):
    assert main(["sweep", "--backbones", "nope", "--out", str(tmp_path), "--benchmark", str(tmp_path)]) == 2
    assert "unknown backbone" in capsys.readouterr().err
    assert main(["sweep", "--tokens", "9M=1", "--out", str(tmp_path), "--benchmark", str(tmp_path)]) == 2
    assert "--tokens" in capsys.readouterr().err


def test_side_by_side_runs_share_the_host_cores(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert _child_env(6)["OMP_NUM_THREADS"] == "2"
    assert _child_env(32)["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the caller's choice wins
    assert _child_env(6)["OMP_NUM_THREADS"] == "3"


def test_appended_rows_leave_the_committed_rows_byte_for_byte(tmp_path):
    path = tmp_path / "results.csv"
    committed = "run,MASE\na,0.1234567890123456789\n"  # more digits than pandas would print back
    path.write_text(committed)
    append_rows(path, [{"MASE": 0.5, "run": "b"}])  # columns in another order: placed under the header's
    assert path.read_text() == committed + "b,0.5\n"
    append_rows(path, [{"run": "c", "MASE": 0.25, "CRPS": 0.2}])  # a new column: at the end, earlier rows padded
    assert path.read_text() == "run,MASE,CRPS\na,0.1234567890123456789,\nb,0.5,\nc,0.25,0.2\n"
    frame = pd.read_csv(path)
    assert frame["run"].tolist() == ["a", "b", "c"] and frame["CRPS"].isna().tolist() == [True, True, False]
    append_rows(path, [{"run": "d,e", "short_contexts": "after missing patches"}])  # quoted as pandas quotes
    assert path.read_text().splitlines()[-1] == '"d,e",,,after missing patches'
    assert path.read_text().splitlines()[1] == "a,0.1234567890123456789,,"
    fresh = tmp_path / "new.csv"
    append_rows(fresh, [{"run": "a", "MASE": 1.0}])
    assert fresh.read_text() == "run,MASE\na,1.0\n"
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    append_rows(empty, [{"run": "a", "MASE": 1.0}])
    assert empty.read_text() == "run,MASE\na,1.0\n"


def test_cli_sweep_hands_compile_to_every_run(tmp_path, monkeypatch, capsys):
    """``tsfm sweep --compile`` reaches the settings the runs are trained with; without it runs stay eager."""
    import tsfm.pipelines.sweep as sweep_module

    seen: list[SweepSettings] = []
    monkeypatch.setattr(sweep_module, "run_sweep", lambda runs, settings, parallel: seen.append(settings) or [])
    common = ["sweep", "--backbones", "mamba2", "--presets", "1M", "--out", str(tmp_path), "--benchmark",
              str(tmp_path)]
    assert main(common) == 0 and main([*common, "--compile"]) == 0
    assert [settings.compile for settings in seen] == [False, True]
    assert "finished 0 run(s)" in capsys.readouterr().out


def test_scoring_with_a_metric_pool_writes_the_same_rows(benchmark, tmp_path, tiny_checkpoint):
    """Metrics computed in worker processes (the GPU machine's path) give the rows of the one-process path, in the
    configurations' order (m4_hourly's and ili's, one per worker)."""
    build_benchmark(tmp_path, datasets=["m4_hourly", "ili"], progress=False)  # raw data checked by `benchmark`
    alone = score_checkpoint(tiny_checkpoint, "tiny", tmp_path, NORMALISER)
    pooled = score_checkpoint(tiny_checkpoint, "tiny", tmp_path, NORMALISER, workers=2)
    assert len(alone) == len(select_configs(tmp_path, None)) == 2
    assert pooled == alone
    assert all(math.isfinite(row["MASE_normalised"]) for row in alone)


def test_a_metric_pool_that_cannot_start_is_refused_before_any_forecast(tmp_path, monkeypatch):
    """A program read from standard input names its main file ``<stdin>``, which a spawned worker cannot re-read:
    the pool would break after the forecasts; it is refused first, with what to do."""
    stdin_main = types.ModuleType("__main__")
    stdin_main.__file__ = "<stdin>"
    monkeypatch.setitem(sys.modules, "__main__", stdin_main)
    with pytest.raises(SweepError, match=r"'<stdin>' is not one.*workers=1"):
        score_checkpoint("no-such-model", "x", tmp_path, NORMALISER, workers=2)
