import math

import pytest
import torch

from tsfm.config import ModelConfig
from tsfm.model import Forecaster, num_parameters

SPECS = ["xlstm[3:1]", "xlstm[1:0]", "mamba2", "gdn", "gdn[neg_eigval]", "transformer"]


def tiny(backbone: str = "xlstm[1:1]", **kw) -> Forecaster:
    torch.manual_seed(0)
    config = ModelConfig(backbone=backbone, d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         context_length=256, train_horizon_patches=2, **kw)
    return Forecaster(config).eval()


@pytest.mark.parametrize("spec", SPECS)
def test_forecast_shape_sorted_and_finite(spec):
    model = tiny(spec)
    context = torch.randn(3, 45)
    context[1, :20] = float("nan")
    out = model.forecast(context, prediction_length=19)
    assert out.shape == (3, 9, 19)
    assert torch.isfinite(out).all()
    assert (out.diff(dim=1) >= 0).all()


def test_all_nan_context_gives_finite_forecast():
    out = tiny().forecast(torch.full((2, 16), float("nan")), 8)
    assert torch.isfinite(out).all()


def test_forecast_is_scale_and_shift_equivariant():
    model = tiny()
    context = torch.randn(2, 40).cumsum(-1)
    base = model.forecast(context, 12)
    moved = model.forecast(context * 1000.0 + 5e4, 12)
    assert torch.allclose(moved, base * 1000.0 + 5e4, rtol=1e-4, atol=1e-1)


def test_forecast_prefix_is_the_same_for_longer_horizons():
    """One causal pass: asking for more steps must not change the first ones."""
    model = tiny()
    context = torch.randn(2, 40)
    short, long = model.forecast(context, 16), model.forecast(context, 64)
    assert torch.allclose(short, long[..., :16], atol=1e-5)


def test_context_after_forecast_origin_does_not_leak():
    """Changing old context changes the forecast; the model really reads its input."""
    model = tiny()
    context = torch.randn(1, 40)
    changed = context.clone()
    changed[0, 5] += 10
    assert not torch.allclose(model.forecast(context, 8), model.forecast(changed, 8))


def test_training_loss_backward_and_learns():
    model = tiny("xlstm[1:1]").train()
    t = torch.arange(64 + 16, dtype=torch.float32)
    series = torch.sin(2 * math.pi * t / 8).repeat(8, 1) + 0.01 * torch.randn(8, 80)
    context, target = series[:, :64], series[:, 64:]
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(60):
        loss = model.training_loss(context, target, mask_ratio=0.2, max_mask_run=2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.5 * first
    assert all(p.grad is not None for p in model.parameters())


def test_training_context_must_be_patch_aligned():
    with pytest.raises(ValueError, match="multiple of 8"):
        tiny().training_loss(torch.randn(2, 30), torch.randn(2, 8))


def test_invalid_config_is_rejected():
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="quantile_levels"):
        ModelConfig(quantile_levels=(0.1, 0.1, 0.5))
    with pytest.raises(ValueError, match="unknown ModelConfig field"):
        ModelConfig.from_dict({"d_modle": 3})


def test_horizon_embedding_starts_neutral_then_moves_only_future_patches():
    """Zero-initialised, the horizon embedding changes nothing; once trained it changes the forecasts of the 2nd and
    later future patches (the masked tokens it is added to) and never the 1st, which the last context token makes."""
    plain, with_horizon = tiny(), tiny(horizon_embedding=True)
    with_horizon.load_state_dict(plain.state_dict(), strict=False)
    context = torch.randn(2, 40)
    assert torch.equal(plain.forecast(context, 24), with_horizon.forecast(context, 24))
    with torch.no_grad():
        with_horizon.horizon.weight.normal_()
    moved = with_horizon.forecast(context, 24)
    base = plain.forecast(context, 24)
    assert torch.allclose(moved[..., :8], base[..., :8], atol=1e-6)
    assert not torch.allclose(moved[..., 8:], base[..., 8:], atol=1e-3)


def test_horizon_embedding_is_trained():
    model = tiny(horizon_embedding=True).train()
    loss = model.training_loss(torch.randn(3, 64), torch.randn(3, 16))
    loss.backward()
    assert model.horizon.weight.grad is not None and model.horizon.weight.grad.abs().sum() > 0


def test_num_parameters_counts_every_value_once() -> None:
    assert num_parameters(torch.nn.Linear(3, 4)) == 16
    shared = torch.nn.Linear(2, 2)
    assert num_parameters(torch.nn.Sequential(shared, shared)) == 6, "a shared parameter counts once"
    model = Forecaster(ModelConfig(backbone="transformer", d_model=32, n_layers=1, n_heads=2))
    assert model.num_parameters() == num_parameters(model) == sum(p.numel() for p in model.parameters())


def test_autoregressive_decoding_feeds_back_the_median_path():
    """The first patch is the same either way; later patches follow the median path fed back patch by patch, and
    each quantile keeps its masked-decoding distance from the median."""
    model = tiny()
    context = torch.randn(2, 40)
    masked = model.forecast(context, 20, decoding="masked")
    auto = model.forecast(context, 20, decoding="autoregressive")
    median = model.quantile_levels.index(0.5)
    patch = model.config.patch_size
    assert torch.allclose(masked[..., :patch], auto[..., :patch], atol=1e-5)
    first = model.forecast(context, patch, decoding="masked")[:, median]
    second = model.forecast(torch.cat([context, first], dim=1), patch, decoding="masked")[:, median]
    assert torch.allclose(auto[:, median, patch : 2 * patch], second, atol=1e-4)
    spread = masked - masked[:, median : median + 1]
    assert torch.allclose(auto - auto[:, median : median + 1], spread, atol=1e-4)
    assert not torch.allclose(masked[..., patch:], auto[..., patch:], atol=1e-3)


def test_decoding_is_validated():
    with pytest.raises(ValueError, match="decoding must be one of"):
        ModelConfig(decoding="beam")
    with pytest.raises(ValueError, match="decoding must be one of"):
        tiny().forecast(torch.randn(1, 40), 8, decoding="beam")
    assert tiny(decoding="autoregressive").config.decoding == "autoregressive"
