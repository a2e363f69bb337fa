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


def test_recent_level_centre_keeps_the_whole_spread():
    """``loc_steps``: the centre is the mean of the last observed steps, the spread still the whole context's; a
    series whose recent steps are all missing keeps the whole mean; a window as long as the context changes nothing."""
    context = torch.tensor([[0.0, 0.0, 0.0, 0.0, 4.0, 8.0], [1.0, 3.0, 5.0, 7.0, float("nan"), float("nan")]])
    whole, recent = fit_scale(context), fit_scale(context, loc_steps=2)
    assert recent.loc.squeeze().tolist() == [6.0, 4.0]  # the second series: its last two steps are missing
    torch.testing.assert_close(recent.scale, whole.scale)
    torch.testing.assert_close(fit_scale(context, loc_steps=6), whole)
    torch.testing.assert_close(fit_scale(context, loc_steps=100), whole)
