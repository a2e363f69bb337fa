"""The Seasonal-Naive gate (``ModelConfig.naive_gate``): a grown model starts as its parent, an open gate copies the
last season, a series without one is untouched, the gate learns, and only masked decoding is offered."""

import json
import math

import numpy as np
import pytest
import torch

from tsfm.config import ModelConfig
from tsfm.model import Forecaster
from tsfm.scaling import ScaleParams
from tsfm.seasonality import detect_period, seasonal_naive_hint
from tsfm.stream import open_stream

PERIOD = 12


def _models(backbone: str = "mamba2", **kw) -> tuple[Forecaster, Forecaster]:
    """A model without the gate and the same model grown by it (the gate still at zero)."""
    torch.manual_seed(0)
    config = ModelConfig(backbone=backbone, d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         context_length=256, train_horizon_patches=3, horizon_embedding=True, **kw)
    plain = Forecaster(config).eval()
    grown = Forecaster(config.replace(naive_gate=True)).eval()
    missing, unexpected = grown.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and sorted(missing) == ["gate.bias", "gate.weight"]
    return plain, grown


def _open(model: Forecaster, weight: float = 1.0) -> Forecaster:
    """``model`` with its gate fully open everywhere (every forecast token moved all the way to Seasonal Naive)."""
    with torch.no_grad():
        model.gate.weight.zero_()
        model.gate.bias.fill_(weight)
    return model


def _batch() -> torch.Tensor:
    """A noisy seasonal series (period 12) and a random walk (no season found), as long as the models' window."""
    t = torch.arange(256, dtype=torch.float32)
    g = torch.Generator().manual_seed(4)
    return torch.stack([10 + 3 * torch.sin(2 * math.pi * t / PERIOD) + 0.2 * torch.randn(256, generator=g),
                        torch.randn(256, generator=g).cumsum(0)])


def test_a_model_grown_by_the_gate_starts_as_the_model_it_grew_from():
    plain, grown = _models()
    context = _batch()
    torch.testing.assert_close(grown.forecast(context, 40), plain.forecast(context, 40))
    target = torch.randn(2, 24)
    torch.testing.assert_close(grown.training_loss(context[:, -192:], target),
                               plain.training_loss(context[:, -192:], target))


def _forecast_quantiles(model: Forecaster, context: torch.Tensor, patches: int) -> torch.Tensor:
    """``[B, Q, patches * P]``: the raw (unsorted) quantiles of the forecast tokens of one forward, in the series'
    units: what the gate acts on (an untrained head's levels are not yet in order; ``forecast`` sorts them)."""
    out = model(context, num_future_tokens=patches - 1)
    raw = out.quantiles[:, -patches:].permute(0, 2, 1, 3).reshape(context.shape[0], len(model.quantile_levels), -1)
    return raw * out.scale.scale[:, :, None] + out.scale.loc[:, :, None]


@pytest.mark.parametrize("backbone", ["mamba2", "transformer"])
def test_an_open_gate_forecasts_the_last_season_and_keeps_the_spread(backbone):
    plain, grown = _models(backbone)
    _open(grown)
    context = _batch()[:, -192:]
    assert int(detect_period(context[:1])[0]) == PERIOD
    ours, theirs = _forecast_quantiles(grown, context, 5), _forecast_quantiles(plain, context, 5)
    median = grown._median_index
    naive = seasonal_naive_hint(context[:1], torch.tensor([PERIOD]), 40)[0]
    torch.testing.assert_close(ours[0, median], naive, rtol=1e-4, atol=1e-4)
    # each quantile moved by its median's move, so the spread around the median is the model's own
    torch.testing.assert_close(ours[0] - ours[0, median], theirs[0] - theirs[0, median], rtol=1e-4, atol=1e-4)
    if int(detect_period(context[1:])[0]) == 0:
        torch.testing.assert_close(ours[1], theirs[1])  # no season: nothing to move towards


def test_a_half_open_gate_lands_half_way():
    plain, grown = _models()
    _open(grown, 0.5)
    context = _batch()[:1, -192:]
    naive = seasonal_naive_hint(context, torch.tensor([PERIOD]), 40)[0]
    median = grown._median_index
    torch.testing.assert_close(_forecast_quantiles(grown, context, 5)[0, median],
                               0.5 * (_forecast_quantiles(plain, context, 5)[0, median] + naive), rtol=1e-4, atol=1e-4)


def test_the_training_loss_reaches_the_gate():
    _, grown = _models()
    grown.train()
    loss = grown.training_loss(_batch()[:, -192:], _batch()[:, :24])
    loss.backward()
    assert grown.gate.weight.grad.abs().sum() > 0 and grown.gate.bias.grad.abs() > 0


def test_the_gated_training_forward_matches_the_forecast():
    """Training scores the forecast tokens as inference forecasts them: the last context token and the masked
    future tokens of ``forward`` carry the gated quantiles that ``forecast`` sorts and returns."""
    _, grown = _models("transformer")
    torch.nn.init.normal_(grown.gate.weight, std=0.5)
    context = _batch()  # a whole window: forecast reads it as forward does (no missing patches before it)
    torch.testing.assert_close(_forecast_quantiles(grown, context, 5).sort(dim=1).values,
                               grown.forecast(context, 40), rtol=1e-4, atol=1e-4)


def test_only_masked_decoding_is_offered():
    _, grown = _models()
    with pytest.raises(ValueError, match="decodes 'masked' only"):
        grown.forecast(_batch(), 40, "autoregressive")
    with pytest.raises(ValueError, match="decoding must be 'masked' for a model with naive_gate"):
        grown.config.replace(decoding="autoregressive")


def test_decoding_from_a_state_without_the_context_is_refused_for_a_gated_model():
    _, grown = _models()
    scale = ScaleParams(torch.zeros(2, 1), torch.ones(2, 1))
    hidden, state = grown.backbone(grown._context_tokens(_batch(), scale), return_state=True)
    with pytest.raises(ValueError, match="hint_context"):
        grown.decode_from_state(hidden[:, -1], state, scale, 40, "masked")


def test_a_stream_of_a_gated_model_matches_its_full_forward():
    _, grown = _models()
    torch.nn.init.normal_(grown.gate.weight, std=0.5)
    series = _batch().numpy().astype(np.float64)
    stream = open_stream(grown, [series[0, :120], series[1, :120]], max_drift=None)
    stream.update([series[0, 120:200], series[1, 120:200]])
    scale = ScaleParams(stream._loc.clone(), stream._scale.clone())
    expected = grown.forecast(torch.as_tensor(series[:, :200], dtype=torch.float32), 40, scale=scale)
    torch.testing.assert_close(stream.forecast_model_quantiles(40), expected, rtol=1e-4, atol=1e-4)


def test_init_from_may_grow_the_model_by_the_gate(tmp_path):
    """``tsfm train --init-from PARENT --naive-gate``: every weight but the gate's comes from the parent."""
    from tsfm.checkpoint import load_model, save_model
    from tsfm.cli import main

    plain, _ = _models()
    save_model(plain, tmp_path / "parent")
    assert main(["train", "--out", str(tmp_path / "child"), "--init-from", str(tmp_path / "parent"), "--naive-gate",
                 "--steps", "1", "--batch-size", "2", "--context-length", "64", "--pool-size", "8",
                 "--learning-rate", "1e-12", "--accelerator", "cpu"]) == 0  # a step too small to move
    config = json.loads((tmp_path / "child" / "model" / "config.json").read_text())["model"]
    assert config["naive_gate"] is True
    child = load_model(tmp_path / "child" / "model")
    start = {k: v.to(torch.bfloat16).float() for k, v in plain.state_dict().items()}  # exports store bfloat16
    torch.testing.assert_close({k: v for k, v in child.state_dict().items() if k in start}, start)
    assert set(child.state_dict()) - set(start) == {"gate.weight", "gate.bias"}
