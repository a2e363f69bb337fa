"""Small helpers shared by the reference ops: compute dtype, chunk boundaries, causal masks, masked exponentials.

Nothing here knows about a particular recurrence; each op module imports what it needs.
"""

from __future__ import annotations

import torch
from torch import Tensor


def compute_dtype(*tensors: Tensor | None) -> torch.dtype:
    """The dtype that states and internal arithmetic use: float32, or float64 when any input is float64.

    Args:
        *tensors: every tensor that enters the recurrence (inputs and initial state); ``None`` entries are skipped.
            Low-precision inputs (bf16, fp16) are promoted to float32 so that long recurrences stay accurate.
    """
    dtype = torch.float32
    for t in tensors:
        if t is not None:
            dtype = torch.promote_types(dtype, t.dtype)
    return dtype


def chunk_bounds(length: int, chunk_size: int) -> list[tuple[int, int]]:
    """Start and end indices of consecutive chunks covering ``range(length)``; the last chunk may be shorter.

    Args:
        length: number of tokens ``T`` (>= 1).
        chunk_size: tokens per chunk ``L`` (>= 1). Ragged tails are sliced, never padded.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return [(start, min(start + chunk_size, length)) for start in range(0, length, chunk_size)]


def causal_mask(length: int, device: torch.device, *, strict: bool = False) -> Tensor:
    """Boolean ``[L, L]`` mask, True where token ``t`` (row) may see token ``s`` (column).

    Args:
        length: chunk length ``L``.
        device: device of the mask (that of the inputs).
        strict: ``True`` for ``s < t`` (the diagonal excluded), ``False`` for ``s <= t``.
    """
    return torch.ones(length, length, dtype=torch.bool, device=device).tril(-1 if strict else 0)


def masked_exp(log_weights: Tensor, mask: Tensor) -> Tensor:
    """``exp(log_weights)`` where ``mask`` is True, exactly 0 elsewhere, safe in forward and backward.

    The masked-out entries are replaced by ``-inf`` *before* exponentiating: their raw value can be huge (a future
    token's log-weight), and ``exp`` followed by multiplication with a 0/1 mask gives ``inf * 0 = NaN`` in the forward
    pass and in the gradient. ``exp(-inf) = 0`` and its derivative is ``0``, so nothing leaks.

    Args:
        log_weights: ``[..., L, L]`` log-weights (finite where ``mask`` holds).
        mask: ``[L, L]`` boolean mask broadcast over the leading dimensions.
    """
    return torch.where(mask, log_weights, float("-inf")).exp()
