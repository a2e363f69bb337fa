import pytest
import torch

from tsfm.heads import QuantileHead, balanced_pinball_loss, pinball_loss, quantile_match_loss


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


def test_balanced_pinball_is_the_mean_over_windows_of_each_windows_log_loss():
    """Each window's own pinball loss (its observed steps only), floored and logged, then averaged over the windows
    that have a target: a window with no target does not count."""
    torch.manual_seed(0)
    levels = [0.1, 0.5, 0.9]
    prediction = torch.randn(4, 5, 3, 8)  # [B, N, Q, P]
    target = torch.randn(4, 5, 8) * torch.tensor([0.1, 1.0, 10.0, 1.0])[:, None, None]
    target[1, 2:] = float("nan")
    target[3] = float("nan")
    balance = 0.05
    expected = torch.stack([torch.log(pinball_loss(prediction[b], target[b], levels) + balance) for b in range(3)])
    torch.testing.assert_close(balanced_pinball_loss(prediction, target, levels, balance), expected.mean())


def test_balanced_pinball_weighs_each_window_by_its_relative_error():
    """The gradient a window gets is its pooled-loss gradient over its loss plus the floor: a window forecast ten
    times worse (in its own scale) no longer gets ten times the pull."""
    levels = [0.5]
    target = torch.zeros(2, 1, 4)
    prediction = torch.tensor([1.0, 10.0])[:, None, None, None].expand(2, 1, 1, 4).clone().requires_grad_(True)
    pinball_loss(prediction, target, levels).backward()
    pooled = prediction.grad.abs().sum((1, 2, 3))
    prediction.grad = None
    balanced_pinball_loss(prediction, target, levels, balance=1e-6).backward()
    relative = prediction.grad.abs().sum((1, 2, 3))
    assert torch.allclose(pooled[0], pooled[1])  # the pooled loss: the same pull per unit of error
    torch.testing.assert_close(relative[0] / relative[1], torch.tensor(10.0), rtol=1e-4, atol=0)


def test_balanced_pinball_without_any_target_is_zero_and_keeps_the_graph():
    prediction = torch.randn(2, 3, 4, requires_grad=True)
    loss = balanced_pinball_loss(prediction, torch.full((2, 4), float("nan")), [0.1, 0.5, 0.9], balance=0.1)
    assert loss.item() == 0.0 and loss.requires_grad
