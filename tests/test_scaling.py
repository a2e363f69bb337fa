import math

import torch

from tsfm.scaling import SCALE_EPS, apply_scale, fit_scale, invert_scale


def test_nan_aware_mean_and_std():
    context = torch.tensor([[1.0, float("nan"), 3.0, 5.0]])
    params = fit_scale(context)
    assert params.loc.item() == 3.0
    assert math.isclose(params.scale.item(), math.sqrt(8 / 3), rel_tol=1e-6)


def test_constant_series_uses_abs_loc_plus_eps():
    params = fit_scale(torch.tensor([[4.0, 4.0, float("nan")], [0.0, 0.0, 0.0]]))
    assert torch.allclose(params.scale.squeeze(), torch.tensor([4.0 + SCALE_EPS, SCALE_EPS]))


def test_all_nan_series_passes_through():
    params = fit_scale(torch.full((1, 5), float("nan")))
    assert params.loc.item() == 0.0 and params.scale.item() == 1.0


def test_round_trip_and_nan_preserved():
    context = torch.randn(3, 50) * 100 + 7
    context[0, :10] = float("nan")
    params = fit_scale(context)
    scaled = apply_scale(context, params)
    assert torch.isnan(scaled[0, :10]).all()
    assert torch.allclose(torch.nanmean(scaled, dim=-1), torch.zeros(3), atol=1e-5)
    back = invert_scale(scaled.unsqueeze(1), params).squeeze(1)
    assert torch.allclose(back[:, 10:], context[:, 10:], rtol=1e-5)
