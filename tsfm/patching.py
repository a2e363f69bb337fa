"""Cutting a scaled context into patch tokens with an observed-mask, and contiguous patch masking for training.

A token is the concatenation ``[values with NaN -> 0, observed mask]`` of one patch of ``P`` steps (DESIGN §2.2).
The mask lets the model tell a true zero from a missing value, and fully masked tokens double as the "future"
placeholders the model forecasts from.
"""

from __future__ import annotations

import torch
from torch import nn

from tsfm.mlp import ResidualMLP


def left_pad_to_multiple(context: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Left-pad ``context [B, T]`` with NaN so that T is a multiple of ``patch_size`` (the newest step stays last)."""
    remainder = context.shape[-1] % patch_size
    if remainder == 0:
        return context
    pad = context.new_full((context.shape[0], patch_size - remainder), float("nan"))
    return torch.cat([pad, context], dim=-1)


def patchify(context: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Turn ``context [B, T]`` (scaled, NaN = missing) into patches ``[B, ceil(T/P), P]``, still holding NaN."""
    padded = left_pad_to_multiple(context, patch_size)
    return padded.reshape(padded.shape[0], -1, patch_size)


def patch_tokens(patches: torch.Tensor) -> torch.Tensor:
    """``[B, N, P]`` patches with NaN -> ``[B, N, 2P]`` tokens ``[values with NaN -> 0, observed mask]``."""
    observed = ~torch.isnan(patches)
    values = torch.where(observed, patches, torch.zeros_like(patches))
    return torch.cat([values, observed.to(patches.dtype)], dim=-1)


def contiguous_patch_mask(
    batch_size: int,
    num_patches: int,
    *,
    mask_ratio: float,
    max_run: int,
    generator: torch.Generator | None = None,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Random runs of whole patches to hide in training, ``[B, N]`` bool (True = hidden).

    Each series draws a number of runs so that about ``mask_ratio`` of its patches are hidden, each run 1 to
    ``max_run`` patches long at a random start. Hiding contiguous spans (rather than single patches) teaches the
    model to carry a forecast across gaps, which is exactly what the masked future tokens ask of it.
    """
    if not 0.0 <= mask_ratio < 1.0:
        raise ValueError(f"mask_ratio must be in [0, 1), got {mask_ratio}")
    if max_run < 1:
        raise ValueError(f"max_run must be >= 1, got {max_run}")
    mask = torch.zeros(batch_size, num_patches, dtype=torch.bool)
    if mask_ratio == 0.0 or num_patches == 0:
        return mask.to(device) if device is not None else mask
    mean_run = (1 + min(max_run, num_patches)) / 2
    runs_per_series = max(1, round(mask_ratio * num_patches / mean_run))
    lengths = torch.randint(1, min(max_run, num_patches) + 1, (batch_size, runs_per_series), generator=generator)
    starts = torch.randint(0, num_patches, (batch_size, runs_per_series), generator=generator)
    positions = torch.arange(num_patches)
    for r in range(runs_per_series):
        start, length = starts[:, r : r + 1], lengths[:, r : r + 1]
        mask |= (positions >= start) & (positions < start + length)
    return mask.to(device) if device is not None else mask


class PatchEmbedding(nn.Module):
    """Residual-MLP embedding of ``[B, N, 2P]`` tokens to ``[B, N, d_model]``."""

    def __init__(self, patch_size: int, hidden_dim: int, d_model: int) -> None:
        super().__init__()
        self.mlp = ResidualMLP(2 * patch_size, hidden_dim, d_model)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.mlp(tokens)
