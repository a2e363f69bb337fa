"""Training one cell on the CPU: a tiny sLSTM learns parity at length 16 and keeps it at length 64; the model
builds every registered backbone through the forecaster's registry; the schedule and settings are checked."""

from __future__ import annotations

import itertools
import time

import pytest
import torch

from tsfm.backbones.registry import BACKBONES
from tsfm.pipelines.state_tracking.model import ModelSize, TokenClassifier
from tsfm.pipelines.state_tracking.train import RESULT_COLUMNS, Cell, TrainSettings, learning_rate, run_cell

TINY = ModelSize(d_model=16, n_layers=1, n_heads=1, chunk_size=16)


def test_slstm_learns_parity_and_keeps_it_at_four_times_the_length() -> None:
    """The seed study's state-tracking claim in miniature: sLSTM (``xlstm[0:1]``) is a nonlinear RNN, so parity
    is a 2-state automaton it can represent at any length; trained at <= 16 it must stay exact at 64."""
    settings = TrainSettings(steps=300, batch_size=32, train_length=16, eval_lengths=(16, 64), eval_sequences=128,
                             learning_rate=1e-2, min_learning_rate=1e-3, warmup_steps=20, size=TINY)
    torch.set_num_threads(1)
    started = time.perf_counter()
    rows = run_cell(Cell("parity", "xlstm[0:1]", seed=0), settings, "cpu")
    assert time.perf_counter() - started < 60
    assert [r["eval_length"] for r in rows] == [16, 64]
    for row in rows:
        assert row["accuracy"] == 1.0 and row["normalised_accuracy"] == 1.0 and row["final_accuracy"] == 1.0, row
        assert row["chance"] == 0.5
    assert rows[0]["train_loss"] < 0.01


def test_an_untrained_model_is_at_chance() -> None:
    """The measure can fail: without training, parity accuracy is near 0.5 and the normalised score near 0."""
    settings = TrainSettings(steps=1, learning_rate=1e-9, min_learning_rate=1e-9, batch_size=2, train_length=16,
                             eval_lengths=(64,), eval_sequences=64, warmup_steps=1, size=TINY)
    (row,) = run_cell(Cell("parity", "xlstm[0:1]", seed=0), settings, "cpu")
    assert abs(row["normalised_accuracy"]) < 0.1
    assert list(row) == list(RESULT_COLUMNS)
    assert (row["task"], row["backbone"], row["seed"], row["steps"], row["train_length"]) == (
        "parity", "xlstm[0:1]", 0, 1, 16)


@pytest.mark.parametrize("spec", ["xlstm[1:1]", "mamba2", "gdn[neg_eigval]", "transformer"])
def test_classifier_builds_backbones_from_the_registry(spec: str) -> None:
    size = ModelSize(d_model=32, n_layers=2, n_heads=2, chunk_size=16)
    model = TokenClassifier(spec, vocab_size=7, num_classes=6, size=size)
    assert isinstance(model.backbone, BACKBONES[spec.split("[")[0]])
    tokens = torch.randint(0, 7, (3, 20))
    logits = model(tokens)
    assert logits.shape == (3, 20, 6)
    changed = tokens.clone()
    changed[:, 10:] = (changed[:, 10:] + 1) % 7
    assert torch.allclose(model(changed)[:, :10], logits[:, :10], atol=1e-5)  # causal: the future cannot leak


def test_classifier_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown backbone 'lstm'"):
        TokenClassifier("lstm", 3, 2, TINY)
    with pytest.raises(ValueError, match=r"\[batch, time\]"):
        TokenClassifier("transformer", 3, 2, TINY)(torch.zeros(4, dtype=torch.long))


def test_schedule_warms_up_then_decays_to_the_floor() -> None:
    settings = TrainSettings(steps=200, warmup_steps=20, learning_rate=1e-3, min_learning_rate=1e-4)
    rates = [learning_rate(step, settings) for step in range(200)]
    assert rates[0] == pytest.approx(5e-5) and rates[19] == pytest.approx(1e-3)
    assert all(a >= b for a, b in itertools.pairwise(rates[19:]))
    assert rates[-1] == pytest.approx(1e-4, rel=1e-3)


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="steps must be positive"):
        TrainSettings(steps=0)
    with pytest.raises(ValueError, match="eval_lengths"):
        TrainSettings(eval_lengths=())
