"""The two validation scripts run end to end on a tiny checkpoint and corpus, and say what they should."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tsfm.checkpoint import load_model, save_model
from tsfm.config import ModelConfig
from tsfm.model import Forecaster
from tsfm.pipelines.data.gift_format import write_dataset

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def checkpoint_and_corpus(tmp_path_factory) -> tuple[Path, Path]:
    """A never-negative corpus (counts-like spikes around a low level) and an untrained model that records the
    training settings the scripts rebuild the validation windows from."""
    root = tmp_path_factory.mktemp("validation")
    rng = np.random.default_rng(0)
    for name, freq in (("counts", "D"), ("counts_hourly", "H")):
        entries = [{"item_id": f"s{i}", "start": pd.Timestamp("2020-01-01"), "freq": freq,
                    "target": rng.poisson(rng.uniform(0.2, 3.0), size=int(rng.integers(40, 300))).astype(np.float32)}
                   for i in range(60)]
        write_dataset(root / "corpus" / name, entries)
    config = ModelConfig(backbone="gdn", d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         context_length=64, train_horizon_patches=2, horizon_embedding=True)
    torch.manual_seed(0)
    checkpoint = save_model(Forecaster(config).eval(), root / "model",
                            training={"train_config": {"context_length": 64, "batch_size": 16, "val_batches": 2}})
    return checkpoint, root / "corpus"


def _call(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def _run(script: str, *args: str) -> str:
    done = _call(script, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_validation_forecast_scores_every_option_and_the_clamp_helps_count_data(checkpoint_and_corpus, tmp_path):
    checkpoint, corpus = checkpoint_and_corpus
    out = tmp_path / "forecast.json"
    printed = _run("validation_forecast.py", str(checkpoint), "--real-data", str(corpus), "--validation-share", "0.3",
                   "--pairs", "--out", str(out))
    assert "| model/context_length/decoding/flip_invariant/naive_blend | all windows |" in printed
    result = json.loads(out.read_text())
    rows = {(tuple(m["flip_invariant"] for m in r["members"]), r["infer_nonnegative"]): r for r in result["rows"]}
    assert set(rows) == {(flips, clamp) for flips in [(False,), (True,), (False, True)] for clamp in (False, True)}
    windows = result["windows"]
    assert windows["all windows"] == 32
    # every window belongs to the frequency band of the dataset it was cut from, and both datasets are held out
    assert windows["frequency: daily"] + windows["frequency: hourly"] == 32
    assert windows["frequency: daily"] > 0 and windows["frequency: hourly"] > 0
    assert windows["dataset: counts"] == windows["frequency: daily"]
    assert rows[(False,), True]["mean of the datasets"] == pytest.approx(
        (rows[(False,), True]["dataset: counts"] + rows[(False,), True]["dataset: counts_hourly"]) / 2)
    plain, clamped, flipped = rows[(False,), False], rows[(False,), True], rows[(True,), False]
    # every truth is >= 0 here, so raising negative quantiles to 0 can only lower the pinball loss; an untrained
    # model spreads its quantiles below 0, so it must lower it
    assert clamped["all windows"] < plain["all windows"]
    assert all(clamped[g] <= plain[g] + 1e-7 for g in result["windows"] if result["windows"][g])
    assert flipped["all windows"] != pytest.approx(plain["all windows"], rel=1e-4)
    # a later row is paired with the first of its clamp setting over the held-out datasets: the geometric mean of
    # the per-dataset ratios, inside its interval
    ratios = [flipped[g] / plain[g] for g in ("dataset: counts", "dataset: counts_hourly")]
    ratio, low, high = flipped["paired_dataset_ratio"]
    assert ratio == pytest.approx(float(np.sqrt(ratios[0] * ratios[1]))) and low <= ratio <= high
    assert "paired_dataset_ratio" not in plain and "Against " in printed
    # the pinball loss is convex in the forecast, so the average of two forecasts scores at most their mean loss
    # (pooled over the same steps); below both it need not be
    pair = rows[(False, True), False]
    assert pair["all windows"] <= 0.5 * (plain["all windows"] + flipped["all windows"]) + 1e-7
    assert pair["all windows"] not in (plain["all windows"], flipped["all windows"])


def test_validation_forecast_averages_checkpoints(checkpoint_and_corpus, tmp_path):
    """Several checkpoints are scored on the first one's windows, and ``--pairs`` averages checkpoints as well: two
    copies of one model average to that model's own loss."""
    checkpoint, corpus = checkpoint_and_corpus
    copy = shutil.copytree(checkpoint, tmp_path / "copy")
    out = tmp_path / "forecast.json"
    printed = _run("validation_forecast.py", str(checkpoint), str(copy), "--real-data", str(corpus),
                   "--validation-share", "0.3", "--no-flip", "--pairs", "--out", str(out))
    rows = [r for r in json.loads(out.read_text())["rows"] if r["infer_nonnegative"]]
    assert [[m["model"] for m in r["members"]] for r in rows] == [[str(checkpoint)], [str(copy)],
                                                                  [str(checkpoint), str(copy)]]
    assert rows[2]["all windows"] == pytest.approx(rows[0]["all windows"]) == pytest.approx(rows[1]["all windows"])
    # each later row is paired over the held-out datasets with the first of its clamp setting: a copy scores 1
    assert "paired_dataset_ratio" not in rows[0]
    assert rows[1]["paired_dataset_ratio"] == pytest.approx([1.0, 1.0, 1.0])
    assert printed.count("paired over the 2 held-out datasets") == 2  # once unclamped, once clamped
    repeated = _call("validation_forecast.py", str(checkpoint), str(checkpoint), "--real-data", str(corpus))
    assert repeated.returncode == 2 and "each checkpoint once" in repeated.stderr


def test_validation_loss_compares_checkpoints_on_the_same_windows(checkpoint_and_corpus, tmp_path):
    checkpoint, corpus = checkpoint_and_corpus
    out = tmp_path / "loss.json"
    printed = _run("validation_loss.py", str(checkpoint), str(checkpoint), "--real-data", str(corpus),
                   "--validation-share", "0.3", "--breakdown", "--out", str(out))
    assert "| checkpoint | steps (own + parents) | validation loss |" in printed
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 and rows[0]["validation_loss"] == rows[1]["validation_loss"] > 0
    assert rows[0]["breakdown"]["all windows"]["windows"] == 32
    assert "frequency: hourly" in rows[0]["breakdown"] and "| frequency: daily |" in printed
    # a group per held-out dataset, and their unweighted mean beside the pooled loss
    breakdown = rows[0]["breakdown"]
    datasets = [breakdown["dataset: counts"], breakdown["dataset: counts_hourly"]]
    assert sum(d["windows"] for d in datasets) == 32
    for part in ("context", "future"):
        assert breakdown["mean of the datasets"][part] == pytest.approx(sum(d[part] for d in datasets) / 2)
    assert "| dataset: counts_hourly |" in printed and "| mean of the datasets |" in printed
    # the second checkpoint is the first, so the paired ratio over datasets is exactly 1
    assert rows[1]["paired_future_ratio"] == [1.0, 1.0, 1.0] and "paired over the 2 held-out datasets" in printed


def test_validation_loss_rebuilds_a_soups_windows_from_its_members_settings(checkpoint_and_corpus, tmp_path):
    """A weight-space average records its members' trainings, not settings of its own; a shipped default that is an
    average of averages must still be the reference whose windows every candidate is scored on."""
    checkpoint, corpus = checkpoint_and_corpus
    soup, nested = tmp_path / "soup", tmp_path / "nested"
    _run("average_checkpoints.py", str(checkpoint), str(checkpoint), "--out", str(soup))
    _run("average_checkpoints.py", str(soup), str(checkpoint), "--weights", "3,1", "--out", str(nested))
    out = tmp_path / "loss.json"
    _run("validation_loss.py", str(nested), str(checkpoint), "--real-data", str(corpus), "--validation-share", "0.3",
         "--out", str(out))
    rows = json.loads(out.read_text())["rows"]
    assert rows[0]["validation_loss"] == pytest.approx(rows[1]["validation_loss"])  # the same weights, same windows
    bare = save_model(Forecaster(ModelConfig(**json.loads((checkpoint / "config.json").read_text())["model"])),
                      tmp_path / "bare", training={"averaged_from": [{"checkpoint": "x", "training": {}}]})
    refused = _call("validation_loss.py", str(bare), "--real-data", str(corpus))
    assert refused.returncode != 0 and "records no training settings" in refused.stderr


def _tiny_benchmark(root: Path, daily_length: int) -> None:
    """Two GIFT-Eval configurations of three noisy waves each: ``m4_hourly`` (400 steps) and ``m4_daily``."""
    rng = np.random.default_rng(0)
    for name, freq, length in (("m4_hourly", "H", 400), ("m4_daily", "D", daily_length)):
        write_dataset(root / name, [
            {"item_id": f"s{i}", "start": pd.Timestamp("2020-01-01"), "freq": freq,
             "target": (10 + np.sin(np.arange(length) / 3) + rng.normal(size=length)).astype(np.float32)}
            for i in range(3)])


def test_eval_checkpoints_scores_earlier_windows_and_names_configurations_too_short_for_them(tmp_path):
    """``--spans-back 3`` scores the span before the before-test windows; a configuration whose series cannot hold
    three spans is skipped and named, never scored on other windows; a count below 1 is refused."""
    _tiny_benchmark(tmp_path / "bench", daily_length=40)  # daily: 3 x 14 steps > 40
    common = ["--benchmark", str(tmp_path / "bench"), "--device", "cpu"]
    before = _run("eval_checkpoints.py", "seasonal_naive", "--before-test", "--out", str(tmp_path / "b"), *common)
    assert "skipped" not in before
    printed = _run("eval_checkpoints.py", "seasonal_naive", "--spans-back", "3", "--normaliser",
                   str(tmp_path / "b" / "seasonal_naive" / "all_results.csv"), "--out", str(tmp_path / "e"), *common)
    assert "skipped 1 configuration(s) whose series are too short for windows 3 test spans back: m4_daily/D/short" in (
        printed)
    earlier = pd.read_csv(tmp_path / "e" / "seasonal_naive" / "all_results.csv")
    scored = pd.read_csv(tmp_path / "b" / "seasonal_naive" / "all_results.csv")
    assert list(earlier["dataset"]) == ["m4_hourly/H/short"] and len(scored) == 2
    assert earlier["eval_metrics/MASE[0.5]"].iloc[0] != scored.set_index("dataset").loc["m4_hourly/H/short",
                                                                                       "eval_metrics/MASE[0.5]"]
    refused = _call("eval_checkpoints.py", "seasonal_naive", "--spans-back", "0", "--out", str(tmp_path / "z"),
                    *common)
    assert refused.returncode == 2 and "--spans-back must be at least 1" in refused.stderr


def test_judge_checkpoints_pools_two_earlier_spans_and_a_copy_of_the_reference_never_ships(checkpoint_and_corpus,
                                                                                            tmp_path):
    """The rule in one command: a candidate identical to the reference ties (ratio exactly 1 on every unit) and does
    not ship; every unit is one configuration on one of the two spans before the test windows."""
    checkpoint, corpus = checkpoint_and_corpus
    _tiny_benchmark(tmp_path / "bench", daily_length=200)
    shutil.copytree(checkpoint, tmp_path / "same" / "model")
    config = ModelConfig(backbone="gdn", d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         context_length=64, train_horizon_patches=2, horizon_embedding=True)
    torch.manual_seed(1)
    save_model(Forecaster(config).eval(), tmp_path / "other" / "model",
               training={"train_config": {"context_length": 64, "batch_size": 16, "val_batches": 2}})
    printed = _run("judge_checkpoints.py", str(tmp_path / "same" / "model"), str(tmp_path / "other" / "model"),
                   "--reference", str(checkpoint), "--benchmark", str(tmp_path / "bench"), "--real-data",
                   str(corpus), "--out", str(tmp_path / "judge"), "--device", "cpu", "--watch", "m4_daily/D/short",
                   "--watch-spans", "2,3,4,5")
    judged = json.loads((tmp_path / "judge" / "judge.json").read_text())["candidates"]
    assert judged["same"]["benchmark"]["MASE"] == [1.0, 1.0, 1.0] and judged["same"]["verdict"] == "does not ship"
    assert judged["same"]["benchmark"]["units"] == judged["other"]["benchmark"]["units"] == 4  # 2 configs x 2 spans
    other = judged["other"]["benchmark"]["CRPS"]
    assert other[1] <= other[0] <= other[2] and other[0] != 1.0
    for spans in (2, 3):  # each span scored against Seasonal Naive on its own windows
        assert (tmp_path / "judge" / f"spans_back_{spans}" / "seasonal_naive" / "all_results.csv").is_file()
    assert "| same | 4 | 1.0000 [1.0000, 1.0000]" in printed and "**does not ship**" in printed
    by_frequency = json.loads((tmp_path / "judge" / "judge.json").read_text())["mase_ratio_by_frequency"]
    assert by_frequency["same"] == {"D": 1.0, "H": 1.0, "all": 1.0} and by_frequency["other"]["all"] != 1.0
    by_configuration = json.loads((tmp_path / "judge" / "judge.json").read_text())["mase_ratio_by_configuration"]
    assert by_configuration["same"] == {"m4_daily/D/short": 1.0, "m4_hourly/H/short": 1.0, "all": 1.0}
    assert "MASE ratio to the reference per term" in printed and "| m4_daily/D/short | 1.000 |" in printed
    refused = _call("judge_checkpoints.py", str(tmp_path / "other" / "model"), "--spans-back", "1,2", "--benchmark",
                    str(tmp_path / "bench"), "--real-data", str(corpus), "--out", str(tmp_path / "z"))
    assert refused.returncode == 2 and "1 is the test windows" in refused.stderr
    refused = _call("judge_checkpoints.py", str(tmp_path / "other" / "model"), "--watch", "m4_daily/D/short",
                    "--watch-spans", "1,2", "--benchmark", str(tmp_path / "bench"), "--real-data", str(corpus),
                    "--out", str(tmp_path / "z"))
    assert refused.returncode == 2 and "--watch-spans takes spans of 2 or more" in refused.stderr
    refused = _call("judge_checkpoints.py", str(tmp_path / "other" / "model"), "--watch", "m4_weekly/W/short",
                    "--benchmark", str(tmp_path / "bench"), "--real-data", str(corpus), "--out", str(tmp_path / "z"))
    assert refused.returncode == 2 and "--watch:" in refused.stderr and "m4_weekly/W/short" in refused.stderr


def test_judge_watch_table_is_one_configurations_mase_per_span_with_its_geometric_mean_and_spans_below(
        checkpoint_and_corpus, tmp_path):
    """``--watch``: the configuration alone, scored on every watched span against Seasonal Naive on the same windows;
    a span too far back for the series is skipped and shows as "-", not as another span's score."""
    checkpoint, corpus = checkpoint_and_corpus
    _tiny_benchmark(tmp_path / "bench", daily_length=200)  # daily: one window of 14 steps a span; 20 spans do not fit
    shutil.copytree(checkpoint, tmp_path / "same" / "model")
    _run("judge_checkpoints.py", str(tmp_path / "same" / "model"), "--reference", str(checkpoint), "--benchmark",
         str(tmp_path / "bench"), "--real-data", str(corpus), "--out", str(tmp_path / "judge"), "--device", "cpu",
         "--watch", "m4_daily/D/short", "--watch-spans", "2,3,20")
    watch = json.loads((tmp_path / "judge" / "judge.json").read_text())["watch"]["m4_daily/D/short"]
    assert set(watch) == {"reference", "same"}
    reference, same = watch["reference"], watch["same"]
    assert reference == same  # the same checkpoint: the same scores on every span
    naive = {s: pd.read_csv(tmp_path / "judge" / "watch" / f"spans_back_{s}" / "seasonal_naive" / "all_results.csv")
             for s in (2, 3)}
    model = {s: pd.read_csv(tmp_path / "judge" / "watch" / f"spans_back_{s}" / "reference" / "all_results.csv")
             for s in (2, 3)}
    column = "eval_metrics/MASE[0.5]"
    expected = {s: model[s][column].iloc[0] / naive[s][column].iloc[0] for s in (2, 3)}
    assert reference["2"] == pytest.approx(expected[2]) and reference["3"] == pytest.approx(expected[3])
    assert "20" not in reference  # too far back for 200 steps: not scored
    assert reference["geometric mean"] == pytest.approx(float(np.sqrt(expected[2] * expected[3])))
    assert reference["spans below"] == f"{sum(v < 1 for v in expected.values())} of 2"
    assert "`m4_daily/D/short` alone" in (tmp_path / "judge" / "judge.md").read_text()


def _judge_checkpoints():
    """The judge script as a module (scripts/ is not a package)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import judge_checkpoints
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return judge_checkpoints


def test_judge_breakdowns_are_geometric_means_of_ratios_per_frequency_term_and_configuration():
    ratio_breakdown = _judge_checkpoints().ratio_breakdown
    units = [("a/H/short", 2), ("a/H/short", 3), ("b/D/long", 2), ("c/H/long", 2)]
    scores = pd.DataFrame(
        [("reference", dataset, spans, 1.0) for dataset, spans in units]
        + [("x", "a/H/short", 2, 2.0), ("x", "a/H/short", 3, 8.0), ("x", "b/D/long", 2, 0.25),
           ("x", "c/H/long", 2, 1.0)],
        columns=["model", "dataset", "spans_back", "MASE"])
    overall = (2.0 * 8.0 * 0.25 * 1.0) ** (1 / 4)
    by_frequency = ratio_breakdown(scores, ["x"], "frequency")["x"]
    assert by_frequency["H"] == pytest.approx((2.0 * 8.0 * 1.0) ** (1 / 3))
    assert by_frequency["D"] == pytest.approx(0.25) and by_frequency["all"] == pytest.approx(overall)
    assert list(by_frequency.index) == ["H", "D", "all"]  # the finest frequency first, the pool last
    by_term = ratio_breakdown(scores, ["x"], "term")["x"]
    assert by_term["short"] == pytest.approx(4.0) and by_term["long"] == pytest.approx(0.5)
    by_configuration = ratio_breakdown(scores, ["x"], "configuration")["x"]
    assert by_configuration["a/H/short"] == pytest.approx(4.0) and by_configuration["c/H/long"] == pytest.approx(1.0)
    assert by_configuration["all"] == pytest.approx(overall)


def test_judge_verdict_needs_both_benchmark_intervals_below_1_and_the_held_out_one_not_lying_above_1():
    verdict = _judge_checkpoints().verdict
    better = {"MASE": [0.95, 0.92, 0.99], "CRPS": [0.96, 0.93, 0.999]}
    assert verdict(better, [1.01, 0.97, 1.05]) == "ships"  # the held-out interval may hold 1: not worse
    assert verdict(better, [1.03, 1.005, 1.06]) == "does not ship"  # worse on the held-out windows
    assert verdict(better, None) == "does not ship"  # fewer than two held-out datasets: no evidence
    assert verdict({**better, "CRPS": [0.96, 0.93, 1.0]}, [0.97, 0.94, 0.99]) == "does not ship"  # must lie below 1


def test_the_judge_scores_every_model_with_the_references_inference_settings():
    """Candidates are scored as the reference ships, the sign-flip average included (on for the default since the
    forty-first session), so a candidate is never judged without a setting the shipped model forecasts with."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import judge_checkpoints

    for flip in (True, False):
        flags = judge_checkpoints.inference_settings(ModelConfig(flip_equivariant=flip, naive_blend="switch"))
        pairs = dict(zip(flags[::2], flags[1::2], strict=True))
        assert pairs["--flip-equivariant"] == ("on" if flip else "off") and pairs["--naive-blend"] == "switch"


def test_judge_with_own_inference_scores_each_model_by_its_config(checkpoint_and_corpus, tmp_path):
    """``--inference own`` judges an inference setting: the reference's weights with ``flip_equivariant`` switched
    tie with the reference when scored with its settings, and differ from it (benchmark and held-out windows) when
    each model forecasts by its own config.json."""
    fixture_checkpoint, corpus = checkpoint_and_corpus
    _tiny_benchmark(tmp_path / "bench", daily_length=200)
    model = load_model(fixture_checkpoint)
    torch.manual_seed(2)
    with torch.no_grad():  # an untrained model forecasts about the context's level, which the flip leaves as it is
        for parameter in model.parameters():
            parameter.add_(0.5 * torch.randn_like(parameter))
    training = {"train_config": {"context_length": 64, "batch_size": 16, "val_batches": 2}}
    checkpoint = save_model(model, tmp_path / "reference" / "model", training=training)
    flipped = Forecaster(dataclasses.replace(model.config, flip_equivariant=not model.config.flip_equivariant))
    flipped.load_state_dict(model.state_dict())
    save_model(flipped.eval(), tmp_path / "flipped" / "model", training=training)
    common = [str(tmp_path / "flipped" / "model"), "--reference", str(checkpoint), "--benchmark",
              str(tmp_path / "bench"), "--real-data", str(corpus), "--device", "cpu"]
    _run("judge_checkpoints.py", *common, "--out", str(tmp_path / "as-reference"))
    _run("judge_checkpoints.py", *common, "--out", str(tmp_path / "own"), "--inference", "own")
    as_reference, own = (json.loads((tmp_path / out / "judge.json").read_text()) for out in ("as-reference", "own"))
    assert as_reference["inference"] == "reference" and own["inference"] == "own" and own["settings"] == []
    assert as_reference["candidates"]["flipped"]["benchmark"]["MASE"] == [1.0, 1.0, 1.0]
    judged = own["candidates"]["flipped"]
    assert judged["benchmark"]["MASE"][0] != 1.0 and judged["benchmark"]["units"] == 4
    assert judged["validation"] is not None and judged["validation"][0] != 1.0
    assert "each model with its own inference settings" in (tmp_path / "own" / "judge.md").read_text()


def test_judge_cache_scores_each_model_once_and_reuses_its_scores_while_nothing_that_made_them_changed(
        checkpoint_and_corpus, tmp_path):
    """``--cache``: a copy of the reference in the same run is scored once (one cached file per distinct model and
    span); a second judge reuses the reference's cached scores (a doctored cache file shows up in its verdict),
    while another inference setting, which changes what the scores mean, does not."""
    checkpoint, corpus = checkpoint_and_corpus
    _tiny_benchmark(tmp_path / "bench", daily_length=200)
    shutil.copytree(checkpoint, tmp_path / "same" / "model")
    cache = tmp_path / "cache"
    common = ["--reference", str(checkpoint), "--benchmark", str(tmp_path / "bench"), "--real-data", str(corpus),
              "--device", "cpu", "--cache", str(cache)]
    _run("judge_checkpoints.py", str(tmp_path / "same" / "model"), *common, "--out", str(tmp_path / "first"))
    first = json.loads((tmp_path / "first" / "judge.json").read_text())["candidates"]["same"]
    assert first["benchmark"]["MASE"] == [1.0, 1.0, 1.0]
    cached = sorted(cache.glob("*.csv"))
    assert len(cached) == 2  # one model (the copy has the reference's files) x two spans
    for path in cached:  # doctor the cache: the reference's MASE doubled
        frame = pd.read_csv(path)
        frame["eval_metrics/MASE[0.5]"] *= 2
        frame.to_csv(path, index=False)
    _run("judge_checkpoints.py", str(tmp_path / "same" / "model"), *common, "--out", str(tmp_path / "second"))
    second = json.loads((tmp_path / "second" / "judge.json").read_text())["candidates"]["same"]
    assert second["benchmark"]["MASE"][0] == pytest.approx(1.0)  # both restored from the same doctored scores
    scores = pd.read_csv(tmp_path / "second" / "spans_back_2" / "reference" / "all_results.csv")
    fresh = pd.read_csv(tmp_path / "first" / "spans_back_2" / "reference" / "all_results.csv")
    assert set(scores["model"]) == {"reference"}
    assert np.allclose(scores["eval_metrics/MASE[0.5]"], 2 * fresh["eval_metrics/MASE[0.5]"])
    _run("judge_checkpoints.py", str(tmp_path / "same" / "model"), *common, "--out", str(tmp_path / "own"),
         "--inference", "own")
    assert len(list(cache.glob("*.csv"))) == 4  # other settings: scored afresh, cached beside
    own = pd.read_csv(tmp_path / "own" / "spans_back_2" / "reference" / "all_results.csv")
    assert not np.allclose(own["eval_metrics/MASE[0.5]"], scores["eval_metrics/MASE[0.5]"])
