"""The textbook-pattern check (tsfm/pipelines/patterns.py) and its command, ``tsfm patterns``."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tsfm.cli import main
from tsfm.pipelines.patterns import PATTERNS, make_pattern, pattern_scores, summary_table

LEVELS = (0.1, 0.5, 0.9)


class _Fake:
    """A stand-in forecaster: ``rule(context [B, T], H) -> median [B, H]``, the same for every decoding."""

    def __init__(self, rule) -> None:
        self.config = SimpleNamespace(patch_size=32, context_length=2048)
        self.quantile_levels = LEVELS
        self.rule = rule

    def forecast(self, context: torch.Tensor, prediction_length: int, decoding: str | None = None) -> torch.Tensor:
        median = self.rule(context, prediction_length)
        return torch.stack([median - 1, median, median + 1], dim=1)


def test_patterns_repeat_at_their_period() -> None:
    for kind in ("sine", "sawtooth", "square"):
        values = make_pattern(kind, 24, 240, noise=0.0, seed=3)
        np.testing.assert_allclose(values[24:], values[:-24], atol=1e-4, err_msg=kind)
        assert 6.5 < values.min() < values.max() < 13.5
    with pytest.raises(ValueError, match="pattern must be one of"):
        make_pattern("triangle", 24, 240)
    with pytest.raises(ValueError, match="length >= 2 x period"):
        make_pattern("sine", 200, 300)


def test_seasonal_naive_scores_like_the_reference_and_the_mean_like_a_flat_line() -> None:
    def repeat_last_period(context: torch.Tensor, horizon: int) -> torch.Tensor:
        return context[:, -24:].repeat(1, horizon // 24 + 1)[:, :horizon]

    def context_mean(context: torch.Tensor, horizon: int) -> torch.Tensor:
        return context.mean(dim=1, keepdim=True).expand(-1, horizon)

    kwargs = dict(patterns=["sine"], periods=[24], decodings=["masked"], context_length=256, prediction_length=192)
    naive = pattern_scores(_Fake(repeat_last_period), **kwargs)
    np.testing.assert_allclose(naive["nmae"], naive["seasonal_naive_nmae"], rtol=1e-5)
    assert (naive["nmae"] < 0.15).all()
    flat = pattern_scores(_Fake(context_mean), **kwargs)
    assert ((flat["nmae"] > 0.8) & (flat["nmae"] < 1.0)).all()  # mean |sin| / std(sin) = (2/pi) / (1/sqrt 2)
    assert len(flat) == 2 and set(flat["seed"]) == {0, 1}
    table = summary_table(flat)
    assert "| sine | 24 | masked |" in table and table.count("\n") == 2


def test_a_checkpoint_is_scored_per_block(tmp_path: Path, capsys, tiny_checkpoint: Path) -> None:
    """A checkpoint folder (random weights: the scoring is under test, not the model), read at its own context."""
    out = tmp_path / "patterns"
    code = main(["patterns", "--model", str(tiny_checkpoint), "--out", str(out), "--periods", "24,96",
                 "--decodings", "masked,autoregressive", "--prediction-length", "160"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| sine | 96 | autoregressive |" in printed
    for name in ("patterns.csv", "patterns.md", "patterns.png"):
        assert (out / name).stat().st_size > 0
    import pandas as pd

    assert "context 512 steps" in (out / "patterns.md").read_text()  # the checkpoint's own context length
    rows = pd.read_csv(out / "patterns.csv")
    assert len(rows) == len(PATTERNS) * 2 * 2 * 2  # patterns x periods x decodings x seeds
    # both decodings share the first patch (DESIGN: the median path starts from the masked pass's first patch)
    first = rows.pivot_table(index=["pattern", "period", "seed"], columns="decoding", values="nmae patch 1")
    np.testing.assert_allclose(first["masked"], first["autoregressive"], rtol=1e-4)


def test_bad_arguments_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["patterns", "--out", str(tmp_path), "--decodings", "beam"]) == 2
    assert "--decodings" in capsys.readouterr().err
    assert main(["patterns", "--out", str(tmp_path), "--model", str(tmp_path / "absent")]) == 2
    assert main(["patterns", "--out", str(tmp_path), "--prediction-length", "128"]) == 2
    assert "must exceed 4 patches (128 steps)" in capsys.readouterr().err
