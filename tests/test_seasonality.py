"""The seasonal hint: periods read from the context, Seasonal-Naive values, and a model that takes them."""

import math

import numpy as np
import pytest
import torch

from tsfm import seasonality
from tsfm.config import ModelConfig
from tsfm.model import Forecaster
from tsfm.scaling import ScaleParams
from tsfm.seasonality import detect_period, seasonal_naive_hint
from tsfm.stream import open_stream

T = 2048


def _sine(period: float, noise: float = 0.3, trend: float = 0.01, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(T, dtype=torch.float32)
    return torch.sin(2 * math.pi * t / period) + noise * torch.randn(T, generator=g) + trend * t


@pytest.mark.parametrize("period", [7, 12, 24, 96, 288])
def test_the_period_of_a_noisy_trending_sine_is_found(period):
    found = int(detect_period(_sine(period)[None])[0])
    assert abs(found - period) <= max(1, period // 50)


def test_a_daily_and_weekly_cycle_reads_as_the_day_and_a_square_wave_as_its_period():
    t = torch.arange(T, dtype=torch.float32)
    g = torch.Generator().manual_seed(1)
    hourly = torch.sin(2 * math.pi * t / 24) + 0.5 * torch.sin(2 * math.pi * t / 168)
    hourly += 0.2 * torch.randn(T, generator=g)
    square = ((t % 288) < 144).float() * 2 + 0.1 * torch.randn(T, generator=g)
    assert detect_period(torch.stack([hourly, square])).tolist() == [24, 288]


def _days(seed: int, period: int = 288) -> torch.Tensor:
    """A daytime peak over flat nights, each day a little higher or lower and stronger or weaker than the last (a
    temperature sensor's week): the autocorrelation's peak at one day is broad and its top wanders."""
    g = torch.Generator().manual_seed(seed)
    days = T // period + 1
    t = torch.arange(days * period, dtype=torch.float32)
    shape = torch.exp(-((2 * math.pi * (t % period) / period - math.pi) ** 2) / 0.8)
    amplitude = 1 + 0.15 * torch.randn(days, generator=g).repeat_interleave(period)
    level = 0.1 * torch.randn(days, generator=g).repeat_interleave(period)
    return (amplitude * shape + level + 0.01 * torch.randn(days * period, generator=g))[-T:]


def test_a_wandering_daily_peak_is_read_exactly_through_its_multiples(monkeypatch):
    """Without the refinement these days read as 289, 287 and 289 steps (a Seasonal Naive that drifts a step a day
    out of phase); the autocorrelation at the day's multiples puts them back on 288."""
    rows = torch.stack([_days(seed) for seed in (3, 15, 18)])
    assert detect_period(rows).tolist() == [288, 288, 288]
    monkeypatch.setattr(seasonality, "_refine_by_multiples", lambda period, *_: period)
    assert detect_period(rows).tolist() == [289, 287, 289]


def test_no_period_in_noise_a_straight_line_or_too_short_a_context():
    g = torch.Generator().manual_seed(2)
    rows = torch.stack([torch.randn(T, generator=g), 3.0 + 0.01 * torch.arange(T, dtype=torch.float32),
                        torch.full((T,), 5.0)])
    assert detect_period(rows).tolist() == [0, 0, 0]
    assert detect_period(_sine(288)[None, -400:]).tolist() == [0]  # not two full days
    assert detect_period(torch.randn(2, 4)).tolist() == [0, 0]
    assert detect_period(torch.randn(0, 512)).shape == (0,)  # no rows: none to read


def test_the_period_ignores_scale_shift_and_missing_steps():
    x = torch.stack([_sine(24), _sine(96, seed=3)])
    gappy = x.clone()
    gappy[:, :700] = float("nan")  # left padding
    gappy[:, 1500:1530] = float("nan")
    base = detect_period(x)
    assert detect_period(7.5 * x - 40.0).tolist() == base.tolist()
    assert (detect_period(gappy) - base).abs().max() <= 1


def test_the_hint_repeats_the_last_season_and_is_missing_without_one():
    context = torch.arange(20, dtype=torch.float32)[None].repeat(2, 1)
    context[0, 15] = float("nan")
    hint = seasonal_naive_hint(context, torch.tensor([7, 0]), 10)
    expected = torch.tensor([13, 14, float("nan"), 16, 17, 18, 19, 13, 14, float("nan")])
    torch.testing.assert_close(hint[0], expected, equal_nan=True)
    assert torch.isnan(hint[1]).all()


def _models(**kw) -> tuple[Forecaster, Forecaster]:
    """A model without the hint and the same model grown by it (the hint's embedding still at zero)."""
    torch.manual_seed(0)
    config = ModelConfig(backbone="mamba2", d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         context_length=256, train_horizon_patches=3, horizon_embedding=True, **kw)
    plain = Forecaster(config).eval()
    grown = Forecaster(config.replace(seasonal_hint=True)).eval()
    missing, unexpected = grown.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and missing and all(k.startswith("hint.") for k in missing)
    return plain, grown


def _seasonal_batch() -> torch.Tensor:
    t = torch.arange(200, dtype=torch.float32)
    g = torch.Generator().manual_seed(4)
    return torch.stack([10 + 3 * torch.sin(2 * math.pi * t / 12) + 0.2 * torch.randn(200, generator=g),
                        torch.randn(200, generator=g).cumsum(0)])


@pytest.mark.parametrize("decoding", ["masked", "autoregressive"])
def test_a_grown_model_starts_as_the_model_it_grew_from(decoding):
    plain, grown = _models()
    context = _seasonal_batch()
    torch.testing.assert_close(grown.forecast(context, 40, decoding), plain.forecast(context, 40, decoding))
    target = torch.randn(2, 24)
    torch.testing.assert_close(grown.training_loss(context[:, -192:], target),
                               plain.training_loss(context[:, -192:], target))


def test_the_hint_moves_the_future_patches_but_not_the_first_one():
    plain, grown = _models()
    torch.nn.init.normal_(grown.hint.residual.weight, std=0.1)
    context = _seasonal_batch()
    a, b = plain.forecast(context, 40), grown.forecast(context, 40)
    torch.testing.assert_close(a[..., :8], b[..., :8])  # the last context token forecasts the first patch
    assert (a[0, :, 8:] - b[0, :, 8:]).abs().max() > 1e-3  # the seasonal row has a hint ...
    if int(detect_period(context[1:])[0]) == 0:
        torch.testing.assert_close(a[1], b[1])  # ... a row without a period is untouched


def test_decoding_from_a_state_without_the_context_is_refused_for_a_hinted_model():
    _, grown = _models()
    context = _seasonal_batch()
    scale = ScaleParams(torch.zeros(2, 1), torch.ones(2, 1))
    hidden, state = grown.backbone(grown._context_tokens(context, scale), return_state=True)
    with pytest.raises(ValueError, match="hint_context"):
        grown.decode_from_state(hidden[:, -1], state, scale, 40, "masked")


def test_a_stream_of_a_hinted_model_matches_its_full_forward():
    _, grown = _models()
    torch.nn.init.normal_(grown.hint.residual.weight, std=0.1)
    series = _seasonal_batch().numpy().astype(np.float64)
    stream = open_stream(grown, [series[0, :120], series[1, :120]], max_drift=None)
    stream.update([series[0, 120:], series[1, 120:]])
    scale = ScaleParams(stream._loc.clone(), stream._scale.clone())
    expected = grown.forecast(torch.as_tensor(series, dtype=torch.float32), 40, scale=scale)
    torch.testing.assert_close(stream.forecast_model_quantiles(40), expected, rtol=1e-4, atol=1e-4)
