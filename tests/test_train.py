"""Pretraining: a run writes a loadable checkpoint with its provenance, resumes exactly, and refuses bad requests
before spending compute."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from tsfm.checkpoint import load_model
from tsfm.cli import main
from tsfm.config import ModelConfig
from tsfm.model import Forecaster
from tsfm.pipelines.data.corpus import Corpus, CorpusError, load_corpus, validation_member
from tsfm.pipelines.data.gift_format import write_dataset
from tsfm.pipelines.run_state import MANIFEST_FILE, RunStateError, pack_run, unpack_run
from tsfm.pipelines.train import (
    TrainConfig,
    TrainingError,
    _ResumePoint,
    batch_config,
    read_metrics,
    train,
    validation_batches,
)


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
    training = json.loads((run / "model" / "config.json").read_text())["training"]
    validated = read_metrics(run)["val_loss"].dropna()
    assert training["best_step"] == best["global_step"] in (4, 8, 12)  # the step the exported weights come from
    assert training["best_val_loss"] == pytest.approx(validated.min())
    # the device scripts' one-line summary of the run reports the same step
    summary = subprocess.run([sys.executable, "scripts/device/summarise_run.py", str(run)], capture_output=True,
                             text=True, check=True, cwd=Path(__file__).resolve().parents[1]).stdout
    assert f"'best_step': {training['best_step']}," in summary and "windows/s" in summary


def test_the_run_summary_gives_the_steady_rate_from_a_step_on(tmp_path):
    """``summarise_run.py --steady-from STEP``: steps per second past the compile, from the run's logged seconds (what
    ``rate_ab.sh`` compares); a step past the run's end says so instead of a number."""
    run = tmp_path / "run"
    train(tiny_model(), tiny_run(steps=6, log_every=1, synthetic_share=1.0), run, prior=walk_prior, progress=False)
    logged = read_metrics(run).dropna(subset=["train_seconds"])
    logged = logged[logged["step"] >= 2]

    def summary(first: int) -> str:
        command = [sys.executable, "scripts/device/summarise_run.py", str(run), "--steady-from", str(first)]
        return subprocess.run(command, capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parents[1]).stdout.splitlines()[-1]

    first, last, rate = re.search(r"from step (\d+) to (\d+): ([0-9.]+)", summary(2)).groups()
    assert (int(first), int(last)) == (logged["step"].min(), logged["step"].max())
    expected = (int(last) - int(first)) / (logged["train_seconds"].max() - logged["train_seconds"].min())
    assert float(rate) == pytest.approx(expected, rel=0.01, abs=0.01)
    assert "n/a" in summary(100)


class _StopAt(L.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step >= self.step:
            trainer.should_stop = True


class _FirstWeights(L.Callback):
    """Records the model's weights as training starts (one dict per run it is given to)."""

    def __init__(self, seen: list[dict[str, torch.Tensor]]) -> None:
        self.seen = seen

    def on_train_start(self, trainer, module) -> None:
        self.seen.append({k: v.detach().clone() for k, v in module.model.state_dict().items()})


@pytest.mark.parametrize("stop", [5, 4], ids=["between-validations", "right-after-a-validation"])
def test_a_run_stopped_and_resumed_follows_the_uninterrupted_trajectory(tmp_path, caplog, stop):
    """The resumed run logs the same losses at the same steps as the uninterrupted one, also where it stopped on
    the step of a validation and a periodic checkpoint (Lightning's restore then counted the logging step one ahead:
    each later row held the loss of the step before it)."""
    caplog.set_level(logging.INFO, logger="lightning.pytorch")
    common = dict(real=corpus(12, 0), validation=corpus(3, 1), prior=walk_prior, progress=False)
    train(tiny_model(), tiny_run(steps=10), tmp_path / "whole", **common)
    train(tiny_model(), tiny_run(steps=10), tmp_path / "split", callbacks=[_StopAt(stop)], **common)
    assert read_metrics(tmp_path / "split")["step"].max() < 9
    train(tiny_model(), tiny_run(steps=10), tmp_path / "split", **common)
    whole, split = read_metrics(tmp_path / "whole"), read_metrics(tmp_path / "split")
    a, b = (frame.dropna(subset=["train_loss"]).set_index("step")["train_loss"] for frame in (whole, split))
    assert list(a.index) == list(b.index) == list(range(10))
    np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=1e-6, atol=0)
    # every validation of the whole run at the same step in the split one (which also validated where it stopped)
    a, b = (frame.dropna(subset=["val_loss"]).set_index("step")["val_loss"] for frame in (whole, split))
    assert list(a.index) == [3, 7] and set(a.index) <= set(b.index)
    np.testing.assert_allclose(b[a.index].to_numpy(), a.to_numpy(), rtol=1e-6, atol=0)
    provenance = json.loads((tmp_path / "split" / "provenance.json").read_text())
    assert provenance["steps"] == 10
    assert "checkpoint" in caplog.text and "weights_only" not in caplog.text  # the resume checkpoints say it


def test_a_call_that_trains_no_step_still_reports_the_last_logged_training_loss(tmp_path):
    """A call that resumes a run at its last step (a time budget that ran out just before export) trains nothing and
    so holds no loss of its own; its provenance keeps the last training loss the earlier calls logged."""
    common = dict(real=corpus(12, 0), validation=corpus(3, 1), prior=walk_prior, progress=False)
    run = tmp_path / "run"
    train(tiny_model(), tiny_run(steps=10, log_every=4), run, **common)
    train(tiny_model(), tiny_run(steps=10, log_every=4), run, **common)
    logged = read_metrics(run).dropna(subset=["train_loss"])
    assert list(logged["step"]) == [3, 7]
    final = json.loads((run / "provenance.json").read_text())["final_train_loss"]
    assert final == pytest.approx(float(logged["train_loss"].iloc[-1]))


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


def test_the_training_seconds_are_logged_as_a_tensor_on_the_device(tmp_path):
    """Lightning turns a logged Python number into a tensor by a blocking host-to-device copy, which on a GPU
    synchronised the stream at every step; the callback hands it a tensor already on the module's device."""
    logged = {}

    class Module:
        device = torch.device("cpu")

        def log(self, name, value, **_):
            logged[name] = value

    class Trainer:
        global_step = 1

    _ResumePoint(tmp_path / "last.ckpt", every=100).on_train_batch_end(Trainer(), Module())
    seconds = logged["train_seconds"]
    assert isinstance(seconds, torch.Tensor) and seconds.device == Module.device and seconds.dtype == torch.float32
    assert 0 <= float(seconds) < 60


def test_no_training_value_is_read_to_the_host_at_every_step(tmp_path):
    """Lightning reads each progress-bar value to a Python number after every step (a GPU sync); the training loss
    reaches the logger and the callbacks as a tensor and the bar reads it only when it refreshes."""
    seen = {}

    class Spy(L.Callback):
        def on_train_end(self, trainer, module):
            seen["bar"] = dict(trainer.progress_bar_metrics)
            seen["callback"] = dict(trainer.callback_metrics)
            bar = next(c for c in trainer.callbacks if isinstance(c, L.pytorch.callbacks.TQDMProgressBar))
            seen["shown"] = bar.get_metrics(trainer, module)

    train(tiny_model(), tiny_run(steps=3), tmp_path / "run", real=corpus(12, 0), validation=corpus(3, 1),
          prior=walk_prior, callbacks=[Spy()])
    assert "train_loss" not in seen["bar"]
    assert isinstance(seen["callback"]["train_loss"], torch.Tensor)
    assert float(seen["shown"]["train_loss"]) == pytest.approx(float(seen["callback"]["train_loss"]), abs=1e-3)


def test_resume_with_other_settings_is_refused(tmp_path):
    common = dict(real=corpus(12, 0), prior=walk_prior, progress=False)
    train(tiny_model(), tiny_run(steps=2), tmp_path / "run", **common)
    with pytest.raises(TrainingError, match="batch_size"):
        train(tiny_model(), tiny_run(steps=2, batch_size=4), tmp_path / "run", **common)


def test_init_from_starts_from_the_parent_weights_and_keeps_its_provenance(tmp_path):
    common = dict(real=corpus(12, 0), validation=corpus(3, 1), prior=walk_prior, progress=False)
    parent = train(tiny_model(), tiny_run(steps=4), tmp_path / "parent", **common)
    seen: list[dict[str, torch.Tensor]] = []
    child = train(tiny_model(), tiny_run(steps=4, seed=1), tmp_path / "child", init_from=parent,
                  callbacks=[_FirstWeights(seen)], **common)
    fresh = train(tiny_model(), tiny_run(steps=4, seed=1), tmp_path / "fresh", callbacks=[_FirstWeights(seen)],
                  **common)
    start = load_model(parent).state_dict()
    torch.testing.assert_close(seen[0], start)  # the child started where the parent ended ...
    assert not all(torch.equal(seen[1][k], v) for k, v in start.items())  # ... a fresh run does not
    provenance = json.loads((child / "config.json").read_text())["training"]
    assert provenance["parent"]["steps"] == 4 and provenance["parent"]["init_from"] == str(parent)
    assert json.loads((fresh / "config.json").read_text())["training"]["parent"] is None


def test_distillation_mixes_the_data_loss_with_the_teacher_match():
    """Weight 0 is the plain loss; a student that is its own teacher has no distance to close; the teacher gets no
    gradient."""
    torch.manual_seed(0)
    student, teacher = Forecaster(tiny_model()), Forecaster(tiny_model())
    context, target = torch.randn(4, 64).cumsum(1), torch.randn(4, 16)
    plain = student.training_loss(context, target)
    assert torch.equal(student.training_loss(context, target, teacher=teacher, distill_weight=0.0), plain)
    assert student.training_loss(context, target, teacher=student, distill_weight=1.0).item() == 0.0
    half = student.training_loss(context, target, teacher=teacher, distill_weight=0.5)
    assert half.item() != pytest.approx(0.5 * plain.item())  # the teacher term is not zero for another model
    half.backward()
    assert all(p.grad is None for p in teacher.parameters())
    assert all(p.grad is not None for p in student.parameters() if p.requires_grad)


def test_a_distilled_run_records_its_teacher_and_refuses_one_that_does_not_fit(tmp_path):
    from tsfm.checkpoint import save_model

    common = dict(real=corpus(12, 0), validation=corpus(3, 1), prior=walk_prior, progress=False)
    teacher = save_model(Forecaster(tiny_model()), tmp_path / "teacher")
    path = train(tiny_model(), tiny_run(teacher=str(teacher), distill_weight=0.3), tmp_path / "run", **common)
    config = json.loads((path / "config.json").read_text())["training"]["train_config"]
    assert (config["teacher"], config["distill_weight"]) == (str(teacher), 0.3)
    other = save_model(Forecaster(dataclasses.replace(tiny_model(), patch_size=16)), tmp_path / "other")
    with pytest.raises(TrainingError, match="patches of 16"):
        train(tiny_model(), tiny_run(teacher=str(other)), tmp_path / "bad", **common)
    assert not (tmp_path / "bad").exists()


def test_validation_windows_do_not_depend_on_the_run_seed():
    """Runs of other seeds are compared (and chosen between) on one validation set."""
    held_out = corpus(6, 1)
    a = validation_batches(tiny_model(), tiny_run(seed=0), held_out, "cpu")
    b = validation_batches(tiny_model(), tiny_run(seed=7), held_out, "cpu")
    assert len(a) == len(b) == 2
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x.context, y.context, equal_nan=True)
        torch.testing.assert_close(x.target, y.target, equal_nan=True)


def test_full_context_prob_reaches_the_sampler_but_not_the_validation_windows():
    held_out = corpus(6, 1)
    run = tiny_run(full_context_prob=1.0)
    assert batch_config(tiny_model(), run).full_context_prob == 1.0
    for x, y in zip(validation_batches(tiny_model(), tiny_run(), held_out, "cpu"),
                    validation_batches(tiny_model(), run, held_out, "cpu"), strict=True):
        torch.testing.assert_close(x.context, y.context, equal_nan=True)
    with pytest.raises(TrainingError, match=r"full_context_prob must be in \[0, 1\], got 1.5"):
        tiny_run(full_context_prob=1.5)


def test_the_prior_mix_reaches_the_synthetic_pool_and_the_provenance(tmp_path, monkeypatch, capsys):
    from tsfm.pipelines import train as train_module
    from tsfm.pipelines.data.priors import DEFAULT_PRIOR_MIX

    mixes, blocks = [], []

    def spy(n, length, generator, mix, block):
        mixes.append(dict(mix))
        blocks.append(block)
        return walk_prior(n, length, generator)

    monkeypatch.setattr(train_module, "sample_priors", spy)
    run = tiny_run(steps=2, synthetic_share=1.0, prior_mix={"random_walk": 3.0, "short": 1.0})
    path = train(tiny_model(), run, tmp_path / "run", progress=False)
    assert mixes and all(mix == {"random_walk": 3.0, "short": 1.0} for mix in mixes)
    assert set(blocks) == {1024}  # a new run's default block: a whole pool refresh in one
    saved = json.loads((path / "config.json").read_text())["training"]["train_config"]
    assert saved["prior_mix"] == {"random_walk": 3.0, "short": 1.0}
    mixes.clear()
    train(tiny_model(), tiny_run(steps=2, synthetic_share=1.0), tmp_path / "default", progress=False)
    assert mixes and all(mix == DEFAULT_PRIOR_MIX for mix in mixes)
    # the command line replaces the named shares of the default mix
    mixes.clear()
    assert main(["train", "--out", str(tmp_path / "cli"), "--steps", "2", "--batch-size", "4", "--context-length",
                 "64", "--pool-size", "32", "--prior-mix", "random_walk=0.5,seasonal=0", "--accelerator",
                 "cpu"]) == 0
    assert mixes and mixes[0] == {**DEFAULT_PRIOR_MIX, "random_walk": 0.5, "seasonal": 0.0}
    capsys.readouterr()


def test_a_run_saved_before_a_setting_existed_resumes_with_its_default(tmp_path):
    common = dict(real=corpus(12, 0), prior=walk_prior, progress=False)
    out = tmp_path / "run"
    train(tiny_model(), tiny_run(steps=4, max_minutes=None), out, callbacks=[_StopAt(2)], **common)
    last = out / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, map_location="cpu", weights_only=False)
    for name in ("full_context_prob", "prior_mix"):  # as a run started before these settings were added
        del checkpoint["tsfm"]["train_config"][name]
    del checkpoint["tsfm"]["model_config"]["infer_nonnegative"]  # a model field added since, too
    torch.save(checkpoint, last)
    with pytest.raises(TrainingError, match="another model config"):
        train(dataclasses.replace(tiny_model(), d_model=48, n_heads=2), tiny_run(steps=4), out, **common)
    # resumes: the missing settings read as their defaults, and an inference setting may differ (training ignores it)
    train(dataclasses.replace(tiny_model(), decoding="autoregressive"), tiny_run(steps=4), out, **common)
    with pytest.raises(TrainingError, match="full_context_prob"):
        train(tiny_model(), tiny_run(steps=4, full_context_prob=0.9), out, **common)


def test_a_run_saved_before_the_prior_block_existed_resumes_only_on_its_blocks_of_256(tmp_path):
    """New runs draw the prior in blocks of 1,024; a run saved before the setting existed drew blocks of 256, so it
    resumes on 256 (its stream) and the new default is refused, naming the setting."""
    assert TrainConfig().prior_block == 1024
    common = dict(real=corpus(12, 0), prior=walk_prior, progress=False)
    out = tmp_path / "run"
    train(tiny_model(), tiny_run(steps=4, max_minutes=None, prior_block=256), out, callbacks=[_StopAt(2)], **common)
    last = out / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, map_location="cpu", weights_only=False)
    del checkpoint["tsfm"]["train_config"]["prior_block"]
    torch.save(checkpoint, last)
    with pytest.raises(TrainingError, match="prior_block"):
        train(tiny_model(), tiny_run(steps=4), out, **common)
    train(tiny_model(), tiny_run(steps=4, prior_block=256), out, **common)
    assert read_metrics(out)["step"].max() == 3


def test_init_from_another_model_is_refused_before_compute(tmp_path):
    common = dict(real=corpus(12, 0), prior=walk_prior, progress=False)
    parent = train(tiny_model(), tiny_run(steps=2), tmp_path / "parent", **common)
    other = dataclasses.replace(tiny_model(), d_model=16)
    with pytest.raises(TrainingError, match="d_model"):
        train(other, tiny_run(steps=2), tmp_path / "child", init_from=parent, **common)
    assert not (tmp_path / "child").exists()


def test_init_from_may_grow_the_model_by_the_seasonal_hint(tmp_path, capsys):
    """The one change a child may make to its parent's model: the hint's embedding is added (at zero), every other
    weight comes from the parent. The command line does the same with --seasonal-hint."""
    common = dict(real=corpus(12, 0), prior=walk_prior, progress=False)
    parent = train(tiny_model(), tiny_run(steps=2), tmp_path / "parent", **common)
    seen: list[dict[str, torch.Tensor]] = []
    child = train(tiny_model().replace(seasonal_hint=True), tiny_run(steps=2), tmp_path / "child",
                  init_from=parent, callbacks=[_FirstWeights(seen)], **common)
    start = load_model(parent).state_dict()
    torch.testing.assert_close({k: v for k, v in seen[0].items() if k in start}, start)
    assert all(not v.any() for k, v in seen[0].items() if k.startswith(("hint.out", "hint.residual")))
    assert load_model(child).config.seasonal_hint
    assert main(["train", "--out", str(tmp_path / "m"), "--init-from", str(parent), "--seasonal-hint", "--steps",
                 "2", "--batch-size", "4", "--context-length", "64", "--pool-size", "16", "--accelerator", "cpu"]) == 0
    assert json.loads((tmp_path / "m" / "model" / "config.json").read_text())["model"]["seasonal_hint"] is True


class _PeakRates(L.Callback):
    """Records each weight's peak learning rate (its optimizer group's initial rate) as training starts."""

    def __init__(self, rates: dict[str, float]) -> None:
        self.rates = rates

    def on_train_start(self, trainer, module) -> None:
        group_of = {id(p): g["initial_lr"] for g in trainer.optimizers[0].param_groups for p in g["params"]}
        self.rates.update({name: group_of[id(p)] for name, p in module.model.named_parameters()})


def test_grown_modules_learn_at_their_own_rate(tmp_path):
    """--grown-lr-scale multiplies the rate of the modules grown over init_from, and only theirs; a run that grows
    nothing refuses it before any compute."""
    common = dict(real=corpus(12, 0), prior=walk_prior, progress=False)
    parent = train(tiny_model(), tiny_run(steps=2), tmp_path / "parent", **common)
    rates: dict[str, float] = {}
    train(tiny_model().replace(seasonal_hint=True), tiny_run(steps=2, grown_lr_scale=10.0), tmp_path / "child",
          init_from=parent, callbacks=[_PeakRates(rates)], **common)
    base = tiny_run().learning_rate
    grown = [v for k, v in rates.items() if k.startswith("hint.")]
    assert grown and grown == pytest.approx([10 * base] * len(grown))
    kept = [v for k, v in rates.items() if not k.startswith("hint.")]
    assert len(kept) > len(grown) and kept == pytest.approx([base] * len(kept))
    with pytest.raises(TrainingError, match="grows none"):
        train(tiny_model(), tiny_run(steps=2, grown_lr_scale=10.0), tmp_path / "same", init_from=parent, **common)
    assert not (tmp_path / "same").exists()
    with pytest.raises(TrainingError, match="grown_lr_scale must be > 0"):
        tiny_run(grown_lr_scale=0.0)


def test_init_from_may_grow_the_model_by_blocks_that_start_as_the_identity(tmp_path, capsys):
    """--grow-layers appends residual blocks (the checkpoint's xlstm[1:1] pattern continued) whose output projections
    start at zero: the grown model forecasts exactly as its parent before training, its new blocks learn at the grown
    rate, and it cannot shrink."""
    common = dict(real=corpus(12, 0), prior=walk_prior, progress=False)
    parent = train(tiny_model(), tiny_run(steps=2), tmp_path / "parent", **common)
    seen: list[dict[str, torch.Tensor]] = []
    rates: dict[str, float] = {}
    deeper = tiny_model().replace(n_layers=4)
    child = train(deeper, tiny_run(steps=2, grown_lr_scale=10.0), tmp_path / "child", init_from=parent,
                  callbacks=[_FirstWeights(seen), _PeakRates(rates)], **common)
    start, first = load_model(parent), Forecaster(deeper).eval()
    first.load_state_dict(seen[0])
    context = torch.randn(3, 40).cumsum(1)
    with torch.no_grad():
        torch.testing.assert_close(first.forecast(context, 16), start.forecast(context, 16))
    assert first.backbone.block_types == ("mlstm", "slstm", "mlstm", "slstm")
    new = [k for k in seen[0] if k.startswith(("backbone.blocks.2.", "backbone.blocks.3."))]
    assert new and {rates[k] for k in new if k in rates} == {10 * tiny_run().learning_rate}
    assert not any(v.any() for k, v in seen[0].items() if k in new and k.endswith(("out_proj.weight", "w_out.weight")))
    assert load_model(child).config.n_layers == 4
    with pytest.raises(TrainingError, match="never remove them"):
        train(tiny_model().replace(n_layers=1), tiny_run(steps=2), tmp_path / "fewer", init_from=parent, **common)
    flags = ["--steps", "2", "--batch-size", "4", "--context-length", "64", "--pool-size", "16", "--accelerator", "cpu"]
    assert main(["train", "--out", str(tmp_path / "m"), "--init-from", str(parent), "--grow-layers", "3", *flags]) == 0
    assert json.loads((tmp_path / "m" / "model" / "config.json").read_text())["model"]["n_layers"] == 3
    assert main(["train", "--out", str(tmp_path / "n"), "--init-from", str(parent), "--grow-layers", "2"]) == 2
    assert "must exceed the 2 blocks" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "n"), "--grow-layers", "4"]) == 2
    assert "give --init-from too" in capsys.readouterr().err


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


def ddp_case(out: str | os.PathLike[str], devices: int, callbacks=()) -> Path:
    """The run the data-parallel tests compare: all augmentations on (missing values, padding and masking make the
    slices of a batch score different numbers of steps), validation on, 6 steps of a global batch of 8."""
    return train(tiny_model(), tiny_run(steps=6, val_every=3, devices=devices), out, real=corpus(12, 0),
                 validation=corpus(3, 1), prior=walk_prior, progress=False, accelerator="cpu", callbacks=callbacks)


def _ddp_in_subprocess(out: Path, devices: int, stop_at: int | None = None) -> None:
    """``ddp_case`` in a fresh process: Lightning's DDP starts the other ranks by re-running the command line,
    which under pytest would re-run pytest."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, str(root / "tests" / "_ddp_train.py"), str(out), str(devices)]
    done = subprocess.run(argv + ([str(stop_at)] if stop_at else []), env=env, cwd=root, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]


def _losses(out: Path, column: str) -> pd.Series:
    metrics = read_metrics(out)
    return metrics.dropna(subset=[column]).set_index("step")[column]


@pytest.fixture(scope="module")
def one_device_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ddp") / "one"
    ddp_case(out, 1)
    return out


def test_slices_weighted_by_their_scored_steps_give_the_whole_batch_loss():
    """The identity the data-parallel loss rests on: the batch loss is the scored-step-weighted mean of its slices'
    losses (and not their plain mean: slices score different numbers of steps)."""
    from tsfm.model import Forecaster
    from tsfm.pipelines.data.batches import BatchSampler
    from tsfm.pipelines.train import batch_config

    torch.manual_seed(0)
    model = Forecaster(tiny_model())
    batch = BatchSampler(batch_config(tiny_model(), tiny_run()), corpus(12, 0), prior=walk_prior).draw(0)
    counts = model.scored_steps(batch.context, batch.target)
    halves = (slice(0, 4), slice(4, 8))
    assert counts[halves[0]].sum() != counts[halves[1]].sum()
    with torch.no_grad():
        whole = model.training_loss(batch.context, batch.target, hidden_patches=batch.hidden_patches)
        weighted = sum(model.training_loss(batch.context[rows], batch.target[rows],
                                           hidden_patches=batch.hidden_patches[rows]) * counts[rows].sum()
                       for rows in halves) / counts.sum()
    torch.testing.assert_close(weighted, whole)


def test_with_window_balance_slices_weighted_by_their_windows_give_the_whole_batch_loss():
    """The same identity for the balanced loss, a mean over windows: each slice counts by its windows with a
    scored step (what ``PretrainModule._share_of_global_loss`` weighs by when ``window_balance`` is set)."""
    from tsfm.model import Forecaster
    from tsfm.pipelines.data.batches import BatchSampler
    from tsfm.pipelines.train import batch_config

    torch.manual_seed(0)
    model = Forecaster(tiny_model())
    batch = BatchSampler(batch_config(tiny_model(), tiny_run()), corpus(12, 0), prior=walk_prior).draw(0)
    windows = model.scored_steps(batch.context, batch.target).gt(0).long()
    halves, balance = (slice(0, 3), slice(3, 8)), 0.05
    with torch.no_grad():
        whole = model.training_loss(batch.context, batch.target, hidden_patches=batch.hidden_patches,
                                    window_balance=balance)
        weighted = sum(model.training_loss(batch.context[rows], batch.target[rows],
                                           hidden_patches=batch.hidden_patches[rows], window_balance=balance)
                       * windows[rows].sum() for rows in halves) / windows.sum()
        pooled = model.training_loss(batch.context, batch.target, hidden_patches=batch.hidden_patches)
    torch.testing.assert_close(weighted, whole)
    assert not torch.isclose(whole, pooled)


def test_a_window_balanced_run_validates_on_its_own_loss_and_logs_the_plain_one(tmp_path, capsys):
    """With ``window_balance`` the validation loss (the checkpoint choice) is the balanced loss and the plain pinball
    loss is logged beside it; ``--window-balance`` reaches the run's recorded settings; a floor <= 0 is refused."""
    out = tmp_path / "run"
    train(tiny_model(), tiny_run(steps=2, val_every=2, window_balance=0.1), out, real=corpus(12, 0),
          validation=corpus(3, 1), prior=walk_prior, progress=False, accelerator="cpu")
    metrics = read_metrics(out).dropna(subset=["val_loss"])
    assert len(metrics) == 1 and metrics["val_pinball"].notna().all()
    model = load_model(out / "model")
    batches = validation_batches(model.config, tiny_run(), corpus(3, 1), "cpu")
    with torch.no_grad():
        balanced = np.mean([model.training_loss(b.context, b.target, window_balance=0.1).item() for b in batches])
        plain = np.mean([model.training_loss(b.context, b.target).item() for b in batches])
    # the exported weights are stored in bfloat16: close, not equal
    np.testing.assert_allclose(metrics[["val_loss", "val_pinball"]].iloc[0], [balanced, plain], rtol=2e-3)
    assert main(["train", "--out", str(tmp_path / "cli"), "--steps", "1", "--batch-size", "4", "--context-length",
                 "64", "--pool-size", "16", "--accelerator", "cpu", "--preset", "1M", "--window-balance", "0.1"]) == 0
    training = json.loads((tmp_path / "cli" / "model" / "config.json").read_text())["training"]
    assert training["train_config"]["window_balance"] == 0.1
    assert main(["train", "--out", str(tmp_path / "bad"), "--window-balance", "0"]) == 2
    assert "window_balance must be > 0" in capsys.readouterr().err
    with pytest.raises(TrainingError, match="window_balance and teacher do not combine"):
        tiny_run(window_balance=0.1, teacher="default")


def test_ddp_over_two_processes_follows_the_one_process_trajectory(one_device_run, tmp_path):
    """Two gloo processes, each on its half of the same global batch, take the steps one process takes."""
    two = tmp_path / "two"
    _ddp_in_subprocess(two, 2)
    for column in ("train_loss", "val_loss"):
        a, b = _losses(one_device_run, column), _losses(two, column)
        assert list(a.index) == list(b.index) and len(a) > 0
        np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=1e-5, atol=1e-7)
    provenance = json.loads((two / "provenance.json").read_text())
    assert provenance["devices"] == 2 and provenance["device"] == "2 x cpu"
    assert provenance["windows_seen"] == 6 * 8 and provenance["tokens_seen"] == 6 * 8 * (64 // 8 + 2)
    assert [p.name for p in (two / "logs").iterdir()] == ["version_0"]  # rank 1 wrote no logs of its own
    ours, theirs = load_model(two / "model").state_dict(), load_model(one_device_run / "model").state_dict()
    for name, value in ours.items():
        torch.testing.assert_close(value, theirs[name], rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("first, then", [(1, 2), (2, 1)])
def test_a_run_resumes_on_another_device_count(one_device_run, tmp_path, first, then):
    """Stopped after 4 steps on ``first`` devices and finished on ``then``: the one-device trajectory."""
    split = tmp_path / "split"
    for devices, stop_at in ((first, 4), (then, None)):
        if devices == 1:
            ddp_case(split, 1, callbacks=[_StopAt(stop_at)] if stop_at else [])
        else:
            _ddp_in_subprocess(split, devices, stop_at)
        if stop_at:
            assert _losses(split, "train_loss").index.max() < 5
    a, b = _losses(one_device_run, "train_loss"), _losses(split, "train_loss")
    assert list(a.index) == list(b.index) == list(range(6))
    np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=1e-5, atol=1e-7)
    provenance = json.loads((split / "provenance.json").read_text())
    assert provenance["steps"] == 6 and provenance["devices"] == then


def test_a_batch_size_not_divisible_by_the_devices_is_refused_before_compute(tmp_path, capsys):
    with pytest.raises(TrainingError, match=r"batch_size \(6\) must be divisible by devices \(4\)"):
        tiny_run(batch_size=6, devices=4)
    assert main(["train", "--out", str(tmp_path / "m"), "--batch-size", "64", "--devices", "3"]) == 2
    assert "must be divisible by devices (3)" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("change, match", [
    ({"steps": 0}, "steps must be a positive integer"),
    ({"devices": 0}, "devices must be a positive integer"),
    ({"max_minutes": 0.0}, "max_minutes"),
    ({"learning_rate": 0.0}, "learning_rate"),
    ({"prior_mix": {"random_walk": 1.0, "nope": 1.0}}, r"prior_mix: .*unknown: \['nope'\]"),
    ({"prior_mix": {"random_walk": -1.0}}, "prior_mix: .*non-negative"),
    ({"mixup_prob": 1.5}, r"mixup_prob must be in \[0, 1\]"),
    ({"distill_weight": -0.1}, r"distill_weight must be in \[0, 1\]"),
    ({"prior_block": 0}, "prior_block must be a positive integer"),
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


def test_covering_split_holds_out_the_ends_of_small_datasets(tmp_path):
    """Under "covering", a dataset of few series gives the end of each series to validation (never trained on) and a
    large dataset still gives whole series; "series" leaves the small dataset out of validation or takes it whole."""
    def series(i: int, length: int) -> np.ndarray:
        return np.arange(length, dtype=np.float32) + 1e4 * i  # exact in float32

    write_dataset(tmp_path / "root" / "big", [{"item_id": f"b{i}", "start": pd.Timestamp("2020-01-01"), "freq": "D",
                                               "target": series(i, 300)} for i in range(60)])
    write_dataset(tmp_path / "root" / "small", [
        {"item_id": f"s{i}", "start": pd.Timestamp("2020-01-01"), "freq": "5min", "target": series(100 + i, length)}
        for i, length in enumerate([10_000, 2_000, 100])])
    train_set, validation = load_corpus(tmp_path / "root", validation_share=0.05, validation_split="covering")
    small_train = [s for s, d in zip(train_set.series, train_set.datasets, strict=True) if d == "small"]
    small_val = [s for s, d in zip(validation.series, validation.datasets, strict=True) if d == "small"]
    # ends of 5% of 10,000 and of 2,000 steps; 100 steps cannot spare the 64-step floor: the whole-series rule
    short_goes_to = "validation" if validation_member("small/s2/0", 0.05) else "train"
    assert [s.size for s in small_train] == [9_500, 1_900] + ([100] if short_goes_to == "train" else [])
    # an end enters validation with its history (the whole series), scored only from the end on
    small_from = [f for f, d in zip(validation.score_from, validation.datasets, strict=True) if d == "small"]
    assert [s.size for s in small_val] == [10_000, 2_000] + ([100] if short_goes_to == "validation" else [])
    assert small_from == [9_500, 1_900] + ([0] if short_goes_to == "validation" else [])
    for head, whole, start in zip(small_train, small_val, small_from, strict=False):
        np.testing.assert_array_equal(whole[:start], head)  # the history is the training part ...
        assert whole[start] == head[-1] + 1  # ... and the scored end follows it, never trained on
    big_val = [s for s, d in zip(validation.series, validation.datasets, strict=True) if d == "big"]
    assert big_val and all(s.size == 300 for s in big_val)  # whole series, as under "series"
    assert all(f == 0 for f, d in zip(validation.score_from, validation.datasets, strict=True) if d == "big")
    _, by_series = load_corpus(tmp_path / "root", validation_share=0.05)
    assert [s.size for s, d in zip(by_series.series, by_series.datasets, strict=True) if d == "big"] == \
        [s.size for s in big_val]
    with pytest.raises(CorpusError, match="validation_split must be one of"):
        load_corpus(tmp_path / "root", validation_split="random")


def test_common_split_scores_only_what_both_splits_hold_out(tmp_path):
    """"common" keeps a small dataset's series end only where "series" holds out that whole series too, so a model
    trained under either split is judged on values it never trained on; large datasets are held out as before."""
    write_dataset(tmp_path / "root" / "big", [{"item_id": f"b{i}", "start": pd.Timestamp("2020-01-01"), "freq": "D",
                                               "target": np.arange(300, dtype=np.float32)} for i in range(60)])
    write_dataset(tmp_path / "root" / "mid", [{"item_id": f"m{i}", "start": pd.Timestamp("2020-01-01"), "freq": "H",
                                               "target": np.arange(4_000, dtype=np.float32)} for i in range(19)])
    held = [validation_member(f"mid/m{i}/0", 0.2) for i in range(19)]
    assert any(held) and not all(held)  # the check below covers both cases
    splits = {name: load_corpus(tmp_path / "root", validation_share=0.2, validation_split=name)[1]
              for name in ("series", "covering", "common")}

    def part(corpus, dataset):
        return [(s.size, f) for s, f, d in zip(corpus.series, corpus.score_from, corpus.datasets, strict=True)
                if d == dataset]

    assert part(splits["covering"], "mid") == [(4_000, 3_200)] * 19  # every end, from its history
    assert part(splits["series"], "mid") == [(4_000, 0)] * sum(held)  # the held-out series, whole
    assert part(splits["common"], "mid") == [(4_000, 3_200)] * sum(held)  # their ends: unseen under both
    assert part(splits["common"], "big") == part(splits["series"], "big") == part(splits["covering"], "big")


@pytest.mark.parametrize("argv, message", [
    (["--backbone", "nope"], "nope"),
    (["--preset", "7M"], "7M"),
    (["--context-length", "100"], "multiple of the patch size"),
    (["--steps", "0"], "steps must be a positive integer"),
    (["--prior-mix", "random_walk"], "--prior-mix: expected FAMILY=SHARE items"),
    (["--prior-mix", "random_walk=lots"], "--prior-mix: expected FAMILY=SHARE items"),
    (["--prior-mix", "nope=0.3"], "unknown: ['nope']"),
    (["--full-context-prob", "2"], "full_context_prob must be in [0, 1]"),
    (["--distill-weight", "0.3"], "--distill-weight needs --teacher"),
    (["--teacher", "no-such-model"], "teacher 'no-such-model'"),
    (["--profile-steps", "5"], "--profile-steps: expected FIRST:COUNT"),
    (["--profile-steps", "a:3"], "--profile-steps: expected FIRST:COUNT"),
    (["--profile-steps", "5:0"], "--profile-steps: COUNT must be between 1 and 200"),
    (["--profile-steps", "5:500"], "--profile-steps: COUNT must be between 1 and 200"),
    (["--prior-block", "0"], "prior_block must be a positive integer"),
])
def test_cli_train_refuses_bad_requests(tmp_path, capsys, argv, message):
    assert main(["train", "--out", str(tmp_path / "m"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_prior_block_of_a_run_makes_its_synthetic_stream_and_is_kept_in_its_provenance(tmp_path, capsys):
    """``--prior-block``: another block size draws other synthetic series (so other weights), the same one the same
    (a pool of 32 refreshes 2 series at a time: blocks of 1 split them, the default's 1,024 does not)."""
    tiny = ["--steps", "3", "--batch-size", "4", "--context-length", "64", "--pool-size", "32", "--preset", "1M",
            "--backbone", "transformer", "--accelerator", "cpu", "--val-every", "100", "--checkpoint-every", "100"]
    for name, block in (("default", []), ("blocks-of-1", ["--prior-block", "1"]), ("again", ["--prior-block", "1"])):
        assert main(["train", "--out", str(tmp_path / name), *tiny, *block]) == 0
    capsys.readouterr()
    weights = {name: load_model(tmp_path / name / "model").state_dict() for name in ("default", "blocks-of-1", "again")}
    config = json.loads((tmp_path / "blocks-of-1" / "model" / "config.json").read_text())["training"]["train_config"]
    assert config["prior_block"] == 1
    assert all(torch.equal(weights["blocks-of-1"][k], v) for k, v in weights["again"].items())
    assert not all(torch.equal(weights["blocks-of-1"][k], v) for k, v in weights["default"].items())


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


def test_init_from_may_move_the_scaling_centre(tmp_path, capsys):
    """--scale-loc-steps over --init-from: the same weights start a run that reads every context centred on its
    recent level (ModelConfig.scale_loc_steps); a bad value is refused before compute."""
    parent = train(tiny_model(), tiny_run(steps=2), tmp_path / "parent", real=corpus(12, 0), prior=walk_prior,
                   progress=False)
    flags = ["--steps", "2", "--batch-size", "4", "--context-length", "64", "--pool-size", "16", "--accelerator", "cpu"]
    assert main(["train", "--out", str(tmp_path / "m"), "--init-from", str(parent), "--scale-loc-steps", "32",
                 *flags]) == 0
    child = json.loads((tmp_path / "m" / "model" / "config.json").read_text())
    assert child["model"] == {**json.loads((parent / "config.json").read_text())["model"], "scale_loc_steps": 32}
    assert child["training"]["parent"]["init_from"] == str(parent)
    assert main(["train", "--out", str(tmp_path / "n"), "--init-from", str(parent), "--scale-loc-steps", "0",
                 *flags]) == 2
    assert "scale_loc_steps must be a positive integer" in capsys.readouterr().err
    assert not (tmp_path / "n").exists()


def test_the_log_has_the_run_s_training_seconds_across_calls(tmp_path):
    """``metrics.csv`` carries the run's accumulated training seconds at each logged step, counting on from where an
    earlier call stopped (so a slow stretch, compiling or checkpointing, can be found in the log)."""
    common = dict(real=corpus(12, 0), validation=corpus(3, 1), prior=walk_prior, progress=False)
    run = tmp_path / "run"
    train(tiny_model(), tiny_run(steps=10), run, callbacks=[_StopAt(5)], **common)
    first_call = read_metrics(run).dropna(subset=["train_seconds"])
    train(tiny_model(), tiny_run(steps=10), run, **common)
    seconds = read_metrics(run).dropna(subset=["train_seconds"]).set_index("step")["train_seconds"]
    assert list(seconds.index) == list(range(10))
    assert (seconds.diff().dropna() > 0).all()  # grows step by step, across the two calls too
    assert seconds.loc[first_call["step"].max()] == pytest.approx(first_call["train_seconds"].iloc[-1])
    provenance = json.loads((run / "provenance.json").read_text())
    assert provenance["train_seconds"] >= seconds.iloc[-1] - 0.05  # the run's total, taken after the last step


@pytest.mark.parametrize("flags, cuda, compiled", [
    ([], False, False),  # a CPU run: its start-up would cost more than a short run gains
    ([], True, True),  # a GPU run compiles unless told not to
    (["--no-compile"], True, False),
    (["--compile"], False, True),
    (["--accelerator", "cpu"], True, False),  # a GPU present but not used: the CPU default
])
def test_tsfm_train_compiles_by_default_on_a_gpu_only(tmp_path, monkeypatch, capsys, flags, cuda, compiled):
    import tsfm.pipelines.train as train_module

    seen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(train_module, "train", lambda model, config, out, **_: seen.append(config) or out)
    assert main(["train", "--out", str(tmp_path / "m"), "--steps", "2", *flags]) == 0
    assert [config.compile for config in seen] == [compiled]
    capsys.readouterr()


# ---- a packed run (tsfm pack-run, tsfm.pipelines.run_state): small, whole, and it resumes where it stopped: at its
# step, on its schedule, close to the uninterrupted trajectory; bad packs and folders are refused by name.

RUN_STATE_DATA = dict(real=corpus(12, 0), validation=corpus(3, 1), prior=walk_prior, progress=False)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A 12-step run stopped after step 6 (its last.ckpt is the resume point) and the same run uninterrupted."""
    root = tmp_path_factory.mktemp("runs")
    train(tiny_model(), tiny_run(steps=12), root / "whole", **RUN_STATE_DATA)
    train(tiny_model(), tiny_run(steps=12), root / "stopped", callbacks=[_StopAt(6)], **RUN_STATE_DATA)
    return root


def test_a_pack_holds_bf16_weights_and_step_sizes_in_shards_under_the_limit(stopped, tmp_path):
    limit = 8 * 2**10
    pack = pack_run(stopped / "stopped", tmp_path / "pack", max_shard_bytes=limit)
    manifest = json.loads((pack / MANIFEST_FILE).read_text())
    assert manifest["global_step"] == 6 and manifest["moments"] == ["exp_avg_sq"]
    assert len(manifest["shards"]) > 1
    tensors = {}
    for name in manifest["shards"]:
        shard = load_file(str(pack / name))
        assert sum(t.numel() * t.element_size() for t in shard.values()) <= limit or len(shard) == 1
        tensors.update(shard)
    checkpoint = torch.load(stopped / "stopped" / "checkpoints" / "last.ckpt", weights_only=False)
    for name, value in checkpoint["state_dict"].items():
        assert torch.equal(tensors[f"weights/{name}"], value.to(torch.bfloat16))
    assert not any(key.startswith("exp_avg/") for key in tensors)
    weights_bytes = sum(v.numel() * 2 for v in checkpoint["state_dict"].values())
    assert manifest["tensor_bytes"] == 2 * weights_bytes  # weights and one moment, two bytes each
    pack_run(stopped / "stopped", pack)  # packed again into the same folder, one shard now: no stale shards left
    assert sorted(p.name for p in pack.iterdir()) == [MANIFEST_FILE, "state.pt", "tensors-00001-of-00001.safetensors"]


def test_an_unpacked_run_resumes_at_its_step_close_to_the_uninterrupted_trajectory(stopped, tmp_path):
    pack = pack_run(stopped / "stopped", tmp_path / "pack")
    resumed = tmp_path / "resumed"
    unpack_run(pack, resumed)
    checkpoint = torch.load(resumed / "checkpoints" / "last.ckpt", weights_only=False)
    original = torch.load(stopped / "stopped" / "checkpoints" / "last.ckpt", weights_only=False)
    assert checkpoint["global_step"] == original["global_step"] == 6
    assert checkpoint["lr_schedulers"] == original["lr_schedulers"]
    for state, before in zip(checkpoint["optimizer_states"][0]["state"].values(),
                             original["optimizer_states"][0]["state"].values(), strict=True):
        assert not state["exp_avg"].any()  # the first moment starts again at zero
        torch.testing.assert_close(state["exp_avg_sq"], before["exp_avg_sq"], rtol=2**-8, atol=0)
        assert state["exp_avg_sq"].dtype == torch.float32

    train(tiny_model(), tiny_run(steps=12), resumed, **RUN_STATE_DATA)
    whole, split = read_metrics(stopped / "whole"), read_metrics(resumed)
    a = whole.dropna(subset=["train_loss"]).set_index("step")["train_loss"]
    b = split.dropna(subset=["train_loss"]).set_index("step")["train_loss"]
    assert list(a.index) == list(b.index) == list(range(12))  # the earlier steps' logs came with the pack
    np.testing.assert_array_equal(b.to_numpy()[:6], a.to_numpy()[:6])
    # the same batches on nearly the same weights: close, not equal (bf16 weights, momentum restarted)
    np.testing.assert_allclose(b.to_numpy()[6:], a.to_numpy()[6:], rtol=0.05)
    assert not np.array_equal(b.to_numpy()[6:], a.to_numpy()[6:])
    provenance = json.loads((resumed / "provenance.json").read_text())
    assert provenance["steps"] == 12 and provenance["best_step"] in (8, 12)  # best chosen after the resume


def test_keep_momentum_keeps_the_first_moment(stopped, tmp_path):
    pack = pack_run(stopped / "stopped", tmp_path / "pack", keep_momentum=True)
    unpack_run(pack, tmp_path / "run")
    state = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)["optimizer_states"][0]
    original = torch.load(stopped / "stopped" / "checkpoints" / "last.ckpt", weights_only=False)["optimizer_states"]
    for moments, before in zip(state["state"].values(), original[0]["state"].values(), strict=True):
        torch.testing.assert_close(moments["exp_avg"], before["exp_avg"], rtol=2**-8, atol=0)


def test_an_unpacked_run_still_refuses_other_settings(stopped, tmp_path):
    unpack_run(pack_run(stopped / "stopped", tmp_path / "pack"), tmp_path / "run")
    with pytest.raises(TrainingError, match="batch_size"):
        train(tiny_model(), tiny_run(steps=12, batch_size=16), tmp_path / "run", **RUN_STATE_DATA)


def test_bad_packs_and_folders_are_refused_by_name(stopped, tmp_path):
    with pytest.raises(RunStateError, match=r"last\.ckpt not found"):
        pack_run(tmp_path / "nothing", tmp_path / "pack")
    with pytest.raises(RunStateError, match="not a packed run"):
        unpack_run(tmp_path, tmp_path / "run")
    pack = pack_run(stopped / "stopped", tmp_path / "pack")
    with pytest.raises(RunStateError, match="exists"):
        unpack_run(pack, stopped / "stopped")  # would overwrite a run
    shard = json.loads((pack / MANIFEST_FILE).read_text())["shards"][0]
    (pack / shard).unlink()
    with pytest.raises(RunStateError, match=f"missing {re.escape(shard)}"):
        unpack_run(pack, tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()  # nothing half-written


def test_the_commands_pack_and_unpack(stopped, tmp_path, capsys):
    assert main(["pack-run", str(stopped / "stopped"), str(tmp_path / "pack"), "--max-shard-mib", "0.01"]) == 0
    assert "files" in capsys.readouterr().out
    assert main(["unpack-run", str(tmp_path / "pack"), str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").is_file()
    assert main(["pack-run", str(tmp_path / "none"), str(tmp_path / "p2")]) == 2
    assert "last.ckpt not found" in capsys.readouterr().err
    assert main(["pack-run", str(stopped / "stopped"), str(tmp_path / "p3"), "--max-shard-mib", "0"]) == 2
    assert "--max-shard-mib" in capsys.readouterr().err
