import pytest
import torch

from tsfm.heads import QuantileHead, pinball_loss, quantile_match_loss


def test_head_shape():
    head = QuantileHead(16, 32, 9, 8)
    assert head(torch.randn(2, 5, 16)).shape == (2, 5, 9, 8)


def test_pinball_matches_definition_and_skips_nan():
    levels = [0.1, 0.5, 0.9]
    pred = torch.tensor([[[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]])  # [1, Q=3, S=2]
    target = torch.tensor([[1.0, float("nan")]])
    # errors y - q: 1, 0, -1 -> losses 0.1*1, 0, (0.9-1)*-1 = 0.1 ; mean over Q = 0.2/3
    assert torch.isclose(pinball_loss(pred, target, levels), torch.tensor(0.2 / 3))


def test_pinball_is_minimised_by_the_true_quantile():
    torch.manual_seed(0)
    y = torch.randn(20000)
    candidates = torch.linspace(-2, 2, 81)
    losses = [pinball_loss(torch.full((1, 1, 20000), float(c)), y[None], [0.9]).item() for c in candidates]
    best = candidates[int(torch.tensor(losses).argmin())]
    assert abs(best - torch.quantile(y, 0.9)) < 0.06


def test_quantile_match_loss_is_the_mean_distance_over_observed_steps():
    prediction = torch.zeros(2, 3, 4)  # [B, Q, S]
    target = torch.tensor([[1.0, float("nan"), 2.0, 3.0], [float("nan")] * 4])
    assert quantile_match_loss(prediction, prediction.clone(), target).item() == 0.0
    shifted = prediction.clone()
    shifted[0] += 0.5  # half a unit on every level and step of the first row ...
    shifted[1] += 9.0  # ... and nine on the second, whose steps have no target
    assert quantile_match_loss(prediction, shifted, target).item() == pytest.approx(0.5)
