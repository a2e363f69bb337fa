import torch

from tsfm.patching import contiguous_patch_mask, left_pad_to_multiple, patch_tokens, patchify


def test_left_pad_keeps_newest_last():
    x = torch.arange(5.0).reshape(1, 5)
    padded = left_pad_to_multiple(x, 4)
    assert padded.shape == (1, 8)
    assert torch.isnan(padded[0, :3]).all() and torch.equal(padded[0, 3:], x[0])


def test_tokens_carry_values_and_observed_mask():
    x = torch.tensor([[1.0, float("nan"), 3.0, 4.0]])
    tokens = patch_tokens(patchify(x, 2))
    assert tokens.shape == (1, 2, 4)
    assert torch.equal(tokens[0, 0], torch.tensor([1.0, 0.0, 1.0, 0.0]))
    assert torch.equal(tokens[0, 1], torch.tensor([3.0, 4.0, 1.0, 1.0]))


def test_contiguous_mask_is_runs_with_requested_ratio():
    gen = torch.Generator().manual_seed(0)
    mask = contiguous_patch_mask(2000, 32, mask_ratio=0.25, max_run=4, generator=gen)
    ratio = mask.float().mean().item()
    assert 0.15 < ratio < 0.3
    # runs: most hidden patches have a hidden neighbour (single isolated patches would be rare for runs of 1-4)
    neighbours = mask[:, 1:] & mask[:, :-1]
    assert neighbours.sum() > 0.4 * mask.sum()
    assert not contiguous_patch_mask(3, 8, mask_ratio=0.0, max_run=2).any()
