"""The Seasonal-Naive blend: weights from an in-context backtest, and what they do to a forecast."""

import math

import pytest
import torch

from tsfm.config import ModelConfig
from tsfm.model import Forecaster
from tsfm.naive_blend import backtest_horizon, blend_with_seasonal_naive, naive_weight


def tiny(**kw) -> Forecaster:
    torch.manual_seed(0)
    config = ModelConfig(backbone="mamba2", d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         context_length=256, train_horizon_patches=2, **kw)
    return Forecaster(config).eval()


def daily_cycle(batch: int = 2, length: int = 240, period: int = 24) -> torch.Tensor:
    """An exactly repeating season: Seasonal Naive forecasts it without error."""
    t = torch.arange(length, dtype=torch.float32)
    shape = torch.sin(2 * math.pi * t / period) + 0.5 * torch.cos(6 * math.pi * t / period)
    return torch.stack([10.0 + (i + 1) * shape for i in range(batch)])


def test_weights_count_each_forecast_inversely_to_its_backtest_error():
    context = daily_cycle(batch=1, length=96, period=24)
    period = torch.tensor([24])
    truth = context[:, -12:]  # Seasonal Naive's backtest is exact here, so make it 2 off instead
    shifted = torch.cat([context[:, :-36], context[:, -36:-12] + 2.0, truth], dim=1)
    model_off_by_one = truth + 1.0
    inverse = naive_weight(shifted, period, model_off_by_one, "inverse_mae")
    inverse_squared = naive_weight(shifted, period, model_off_by_one, "inverse_mse")
    switch = naive_weight(shifted, period, model_off_by_one, "switch")
    torch.testing.assert_close(inverse, torch.tensor([1.0 / 3.0]))  # errors 1 and 2: weights 2/3 and 1/3
    torch.testing.assert_close(inverse_squared, torch.tensor([1.0 / 5.0]))  # squared errors 1 and 4: 4/5 and 1/5
    assert switch.item() == 0.0  # the model was closer
    assert naive_weight(shifted, period, truth + 3.0, "switch").item() == 1.0
    assert naive_weight(shifted, torch.tensor([0]), truth + 3.0, "switch").item() == 0.0  # no season, no blend
    assert naive_weight(shifted, torch.tensor([48]), truth + 3.0, "switch").item() == 0.0  # history < 2 periods
    with pytest.raises(ValueError, match="naive_blend must be one of"):
        naive_weight(shifted, period, truth, "average")


@pytest.mark.parametrize("how", ["inverse_mae", "inverse_mse", "switch"])
def test_an_exactly_repeating_season_is_forecast_as_seasonal_naive(how):
    """Seasonal Naive's backtest error is 0, so both blends move the median all the way onto it, and every quantile
    by the same amount (sorted, spread kept)."""
    model = tiny()
    context = daily_cycle()
    with torch.no_grad():
        plain = model.forecast(context, 30)
        blended = model.forecast(context, 30, naive_blend=how)
    median = model.quantile_levels.index(0.5)
    expected = context[:, -24:].repeat(1, 2)[:, :30]
    torch.testing.assert_close(blended[:, median], expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(blended - blended[:, median : median + 1], plain - plain[:, median : median + 1],
                               rtol=1e-4, atol=1e-4)
    assert (blended.diff(dim=1) >= 0).all()


def test_no_season_or_off_leaves_the_forecast_alone():
    model = tiny()
    walk = torch.randn(2, 200, generator=torch.Generator().manual_seed(1)).cumsum(1)
    with torch.no_grad():
        plain = model.forecast(walk[:, -20:], 16)
        assert torch.equal(model.forecast(walk[:, -20:], 16, naive_blend="inverse_mae"), plain)  # no period read
        season = daily_cycle()
        assert torch.equal(model.forecast(season, 16, naive_blend="off"), model.forecast(season, 16))
    blended = tiny(naive_blend="switch")
    with torch.no_grad():  # the config's setting is the default of forecast
        assert torch.equal(blended.forecast(season, 16), model.forecast(season, 16, naive_blend="switch"))


def test_the_backtest_sees_only_the_history_before_the_held_out_steps():
    seen = []

    def backtest(history: torch.Tensor, horizon: int) -> torch.Tensor:
        seen.append((history.shape[1], horizon))
        return history[:, -horizon:]  # any forecast: only the call is checked

    context = daily_cycle(length=100)
    blend_with_seasonal_naive(context, torch.zeros(2, 3, 70), 1, "switch", backtest)
    assert seen == [(100 - backtest_horizon(100, 70), 50)]


def test_a_bad_setting_is_refused():
    with pytest.raises(ValueError, match="naive_blend must be one of"):
        ModelConfig(naive_blend="always")
    with pytest.raises(ValueError, match="naive_blend must be one of"):
        tiny().forecast(daily_cycle(), 8, naive_blend="always")
