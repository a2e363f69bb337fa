"""Pretraining: a run writes a loadable checkpoint with its provenance, resumes exactly, and refuses bad requests
before spending compute."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch

from tsfm.checkpoint import load_model
from tsfm.cli import main
from tsfm.config import ModelConfig
from tsfm.pipelines.data.corpus import Corpus, CorpusError, load_corpus
from tsfm.pipelines.data.gift_format import write_dataset
from tsfm.pipelines.train import TrainConfig, TrainingError, read_metrics, train, validation_batches


def tiny_model() -> ModelConfig:
    return ModelConfig(backbone="xlstm[1:1]", d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                       context_length=64, train_horizon_patches=2)


def walk_prior(n: int, length: int, g: torch.Generator) -> torch.Tensor:
    return torch.randn(n, length, generator=g, device=g.device).cumsum(1)


def corpus(count: int, seed: int) -> Corpus:
    rng = np.random.default_rng(seed)
    out = Corpus()
    for i in range(count):
        t = np.arange(int(rng.integers(80, 400)))
        out.append((np.sin(t / rng.uniform(2, 9)) + rng.normal(0, 0.1, t.size)).astype(np.float32), f"d{i % 3}")
    return out


def tiny_run(**changes) -> TrainConfig:
    return TrainConfig(**{"steps": 8, "batch_size": 8, "warmup_steps": 2, "context_length": 64, "pool_size": 32,
                          "val_every": 4, "val_batches": 2, "checkpoint_every": 4, "log_every": 1, **changes})


def test_train_writes_a_loadable_checkpoint_with_provenance(tmp_path):
    path = train(tiny_model(), tiny_run(), tmp_path / "run", real=corpus(12, 0), validation=corpus(3, 1),
                 prior=walk_prior, progress=False)
    model = load_model(path)
    assert torch.isfinite(model.forecast(torch.randn(2, 64), 16)).all()
    training = json.loads((path / "config.json").read_text())["training"]
    assert training["steps"] == 8 and training["train_config"]["batch_size"] == 8
    assert training["tokens_seen"] == 8 * 8 * (64 // 8 + 2)
    assert training["best_val_loss"] is not None and training["best_val_loss"] > 0
    assert (tmp_path / "run" / "loss.png").is_file()
    metrics = read_metrics(tmp_path / "run")
    assert metrics["val_loss"].notna().sum() == 2  # validated at steps 4 and 8


def test_the_exported_weights_are_the_best_validated_ones(tmp_path):
    run = tmp_path / "run"
    train(tiny_model(), tiny_run(steps=12), run, real=corpus(12, 0), validation=corpus(3, 1), prior=walk_prior,
          progress=False)
    best = torch.load(run / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=False)
    exported = load_model(run / "model")
    for name, value in exported.state_dict().items():
        torch.testing.assert_close(value, best["state_dict"][f"model.{name}"].to(torch.bfloat16).float())


class _StopAt(L.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step >= self.step:
            trainer.should_stop = True


def test_a_run_stopped_and_resumed_follows_the_uninterrupted_trajectory(tmp_path):
    common = dict(real=corpus(12, 0), validation=corpus(3, 1), prior=walk_prior, progress=False)
    train(tiny_model(), tiny_run(steps=10), tmp_path / "whole", **common)
    train(tiny_model(), tiny_run(steps=10), tmp_path / "split", callbacks=[_StopAt(5)], **common)
    assert read_metrics(tmp_path / "split")["step"].max() < 9
    train(tiny_model(), tiny_run(steps=10), tmp_path / "split", **common)
    whole, split = read_metrics(tmp_path / "whole"), read_metrics(tmp_path / "split")
    column = "train_loss"
    a = whole.dropna(subset=[column]).set_index("step")[column]
    b = split.dropna(subset=[column]).set_index("step")[column]
    assert list(a.index) == list(b.index) == list(range(10))
    np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=1e-6, atol=0)
    provenance = json.loads((tmp_path / "split" / "provenance.json").read_text())
    assert provenance["steps"] == 10


def test_max_minutes_is_the_budget_of_each_call_not_of_the_whole_run(tmp_path):
    """A run stopped by one call's time budget continues in the next call: the time a checkpoint has already
    trained (here made to look like 20 minutes) does not count against the new call's ``max_minutes``."""
    common = dict(real=corpus(12, 0), prior=walk_prior, progress=False)
    run = tmp_path / "run"
    train(tiny_model(), tiny_run(steps=10, max_minutes=10), run, callbacks=[_StopAt(5)], **common)
    last = run / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, map_location="cpu", weights_only=False)
    timers = [key for key in checkpoint["callbacks"] if key.startswith("_CallBudget") or key.startswith("Timer")]
    assert timers, "the time budget callback keeps no state: nothing to check"
    for key in timers:
        checkpoint["callbacks"][key]["time_elapsed"] = {"train": 1200.0, "sanity_check": 0.0, "validate": 0.0,
                                                        "test": 0.0, "predict": 0.0}
    torch.save(checkpoint, last)
    train(tiny_model(), tiny_run(steps=10, max_minutes=10), run, **common)
    assert json.loads((run / "provenance.json").read_text())["steps"] == 10


def test_resume_with_other_settings_is_refused(tmp_path):
    common = dict(real=corpus(12, 0), prior=walk_prior, progress=False)
    train(tiny_model(), tiny_run(steps=2), tmp_path / "run", **common)
    with pytest.raises(TrainingError, match="batch_size"):
        train(tiny_model(), tiny_run(steps=2, batch_size=4), tmp_path / "run", **common)


def test_init_from_starts_from_the_parent_weights_and_keeps_its_provenance(tmp_path):
    common = dict(real=corpus(12, 0), validation=corpus(3, 1), prior=walk_prior, progress=False)
    parent = train(tiny_model(), tiny_run(steps=4), tmp_path / "parent", **common)
    seen: list[dict[str, torch.Tensor]] = []

    class _FirstWeights(L.Callback):
        def on_train_start(self, trainer, module) -> None:
            seen.append({k: v.detach().clone() for k, v in module.model.state_dict().items()})

    child = train(tiny_model(), tiny_run(steps=4, seed=1), tmp_path / "child", init_from=parent,
                  callbacks=[_FirstWeights()], **common)
    fresh = train(tiny_model(), tiny_run(steps=4, seed=1), tmp_path / "fresh", callbacks=[_FirstWeights()], **common)
    start = load_model(parent).state_dict()
    torch.testing.assert_close(seen[0], start)  # the child started where the parent ended ...
    assert not all(torch.equal(seen[1][k], v) for k, v in start.items())  # ... a fresh run does not
    provenance = json.loads((child / "config.json").read_text())["training"]
    assert provenance["parent"]["steps"] == 4 and provenance["parent"]["init_from"] == str(parent)
    assert json.loads((fresh / "config.json").read_text())["training"]["parent"] is None


def test_validation_windows_do_not_depend_on_the_run_seed():
    """Runs of other seeds are compared (and chosen between) on one validation set."""
    held_out = corpus(6, 1)
    a = validation_batches(tiny_model(), tiny_run(seed=0), held_out, "cpu")
    b = validation_batches(tiny_model(), tiny_run(seed=7), held_out, "cpu")
    assert len(a) == len(b) == 2
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x.context, y.context, equal_nan=True)
        torch.testing.assert_close(x.target, y.target, equal_nan=True)


def test_init_from_another_model_is_refused_before_compute(tmp_path):
    common = dict(real=corpus(12, 0), prior=walk_prior, progress=False)
    parent = train(tiny_model(), tiny_run(steps=2), tmp_path / "parent", **common)
    other = dataclasses.replace(tiny_model(), d_model=16)
    with pytest.raises(TrainingError, match="d_model"):
        train(other, tiny_run(steps=2), tmp_path / "child", init_from=parent, **common)
    assert not (tmp_path / "child").exists()


def test_cli_init_from_takes_the_model_from_the_checkpoint(tmp_path, capsys):
    parent = train(tiny_model(), tiny_run(steps=2), tmp_path / "parent", real=corpus(12, 0), prior=walk_prior,
                   progress=False)
    assert main(["train", "--out", str(tmp_path / "m"), "--init-from", str(parent), "--backbone", "mamba2"]) == 2
    assert "--backbone: the model comes from --init-from" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "m"), "--init-from", str(tmp_path / "nowhere")]) == 2
    assert "neither a built-in model" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "m"), "--init-from", str(parent), "--steps", "2",
                 "--batch-size", "4", "--context-length", "64", "--pool-size", "16", "--accelerator", "cpu"]) == 0
    child = json.loads((tmp_path / "m" / "model" / "config.json").read_text())
    assert child["model"] == json.loads((parent / "config.json").read_text())["model"]


@pytest.mark.parametrize("change, match", [
    ({"steps": 0}, "steps must be a positive integer"),
    ({"max_minutes": 0.0}, "max_minutes"),
    ({"learning_rate": 0.0}, "learning_rate"),
])
def test_bad_train_config_is_refused(change, match):
    with pytest.raises(TrainingError, match=match):
        tiny_run(**change)


def test_context_not_a_multiple_of_the_patch_is_refused_before_compute(tmp_path):
    with pytest.raises(TrainingError, match="multiple of the patch size"):
        train(tiny_model(), tiny_run(context_length=60), tmp_path / "run", real=corpus(4, 0), prior=walk_prior)
    assert not (tmp_path / "run").exists()


def test_nothing_to_train_on_is_refused(tmp_path):
    with pytest.raises(TrainingError, match="nothing to train on"):
        train(tiny_model(), tiny_run(synthetic_share=0.0), tmp_path / "run", real=None)


def test_corpus_errors_are_clear(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="holds no GIFT-Eval dataset"):
        load_corpus(tmp_path / "empty")
    entries = [{"item_id": "a", "start": pd.Timestamp("2020-01-01"), "freq": "H",
                "target": np.arange(100, dtype=np.float32)}]
    broken = write_dataset(tmp_path / "broken" / "set", entries)
    for shard in broken.glob("*.arrow"):
        shard.write_bytes(b"not arrow")
    with pytest.raises(CorpusError, match="cannot read dataset"):
        load_corpus(tmp_path / "broken")


def test_corpus_split_holds_out_whole_series_by_a_stable_hash(tmp_path):
    entries = [{"item_id": f"s{i}", "start": pd.Timestamp("2020-01-01"), "freq": "H",
                "target": np.arange(100, dtype=np.float32) + 1000 * i} for i in range(200)]
    write_dataset(tmp_path / "root" / "hourly", entries)
    train_a, val_a = load_corpus(tmp_path / "root", validation_share=0.1)
    _, val_b = load_corpus(tmp_path / "root", validation_share=0.1)
    assert 5 <= len(val_a) <= 40 and len(train_a) + len(val_a) == 200
    assert [s[0] for s in val_a.series] == [s[0] for s in val_b.series]
    assert not {float(s[0]) for s in val_a.series} & {float(s[0]) for s in train_a.series}


@pytest.mark.parametrize("argv, message", [
    (["--backbone", "nope"], "nope"),
    (["--preset", "7M"], "7M"),
    (["--context-length", "100"], "multiple of the patch size"),
    (["--steps", "0"], "steps must be a positive integer"),
])
def test_cli_train_refuses_bad_requests(tmp_path, capsys, argv, message):
    assert main(["train", "--out", str(tmp_path / "m"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_train_refuses_an_empty_corpus_folder(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["train", "--out", str(tmp_path / "m"), "--real-data", str(tmp_path / "empty")]) == 2
    assert "holds no GIFT-Eval dataset" in capsys.readouterr().err


def test_tsfm_import_stays_light():
    """tsfm must not import pipelines or serving (imports point one way), nor heavy optional libraries."""
    code = ("import sys, tsfm, tsfm.forecast, tsfm.checkpoint; "
            "bad = [m for m in ('tsfm.pipelines', 'tsfm.serving', 'lightning', 'gluonts', 'fastapi') "
            "if m in sys.modules]; print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
