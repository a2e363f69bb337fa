"""Mamba-2 SSD (state-space duality): the one-token step (the definition), the recurrent and the chunkwise form.

Per head ``h``, with positive step sizes ``dt`` (already softplus'd) and positive decay rates ``A`` (``exp(A_log)``)::

    S_t = exp(-A_h dt_t) S_{t-1} + dt_t B_t x_t^T        # S: [N, P]; B plays the key, x the value
    y_t = S_t^T C_t                                      # C plays the query; no ``D x`` skip term (the layer adds it)

The chunkwise form is the standard segsum form: with ``b_t`` the cumulative log-decay ``-A sum dt`` from the chunk
start, the intra-chunk part is a causal matrix ``exp(b_t - b_s) (C_t . B_s) dt_s`` applied to ``x`` and the carried
state enters as ``exp(b_t) C_t^T S_0``. Future entries are masked *before* ``exp`` (their ``b_t - b_s`` is positive
and can overflow). This module knows nothing of time series.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tsfm.kernels._reference_common import causal_mask, chunk_bounds, compute_dtype, masked_exp


def ssd_init_state(
    batch: int,
    heads: int,
    n_dim: int,
    p_dim: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """A fresh SSD state, all zeros.

    Args:
        batch: batch size ``B``.
        heads: number of heads ``H``.
        n_dim: state width ``N`` (width of ``B`` and ``C``).
        p_dim: head width ``P`` (width of ``x``).
        device: device of the state.
        dtype: dtype of the state (float32, or float64 for float64 inputs).

    Returns:
        ``S [B, H, N, P]``.
    """
    return torch.zeros(batch, heads, n_dim, p_dim, device=device, dtype=dtype)


def ssd_step(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
    """One SSD token: the definition that the other forms must match.

    Args:
        x: ``[B, H, P]`` input of this token (the value written into the state).
        dt: ``[B, H]`` positive step size; scales both the write and the decay.
        A: ``[H]`` positive decay rate per head; the state decays by ``exp(-A dt)``.
        B: ``[B, H, N]`` input projection (the key).
        C: ``[B, H, N]`` output projection (the query).
        state: ``S [B, H, N, P]`` before this token; use :func:`ssd_init_state` to start.

    Returns:
        ``y [B, H, P]`` in the dtype of ``x`` and the state after this token.
    """
    dtype = compute_dtype(x, dt, A, B, C, state)
    x_, dt, A, B, C, state = (t.to(dtype) for t in (x, dt, A, B, C, state))
    decay = torch.exp(-A * dt)
    state = decay[..., None, None] * state + (dt[..., None] * B)[..., :, None] * x_[..., None, :]
    y = torch.einsum("bhnp,bhn->bhp", state, C)
    return y.to(x.dtype), state


def ssd_recurrent(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    *,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """SSD over a sequence as a Python loop over :func:`ssd_step` (slow; the spec the others are tested on).

    Args:
        x: ``[B, T, H, P]`` inputs.
        dt: ``[B, T, H]`` positive step sizes.
        A: ``[H]`` positive decay rates.
        B: ``[B, T, H, N]`` input projections.
        C: ``[B, T, H, N]`` output projections.
        initial_state: ``S [B, H, N, P]`` to continue from; ``None`` means zeros.
        output_final_state: also return the state after the last token.

    Returns:
        ``y [B, T, H, P]`` (dtype of ``x``) and the final state, or ``None``.
    """
    batch, length, heads, p_dim = x.shape
    state = initial_state
    if state is None:
        state = ssd_init_state(batch, heads, B.shape[-1], p_dim, device=x.device, dtype=compute_dtype(x, dt, A, B, C))
    ys = []
    for t in range(length):
        y, state = ssd_step(x[:, t], dt[:, t], A, B[:, t], C[:, t], state)
        ys.append(y)
    return torch.stack(ys, dim=1), (state if output_final_state else None)


def _ssd_chunk(x: Tensor, dt: Tensor, log_decay: Tensor, B: Tensor, C: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
    """One chunk of ``L`` tokens: parallel inside, starting from the carried state.

    Args:
        x: ``[B, H, L, P]`` inputs (head-major inside the chunk for the matmuls).
        dt: ``[B, H, L]`` step sizes.
        log_decay: ``[B, H, L]`` ``-A dt``, the log of each token's decay.
        B: ``[B, H, L, N]`` input projections.
        C: ``[B, H, L, N]`` output projections.
        state: ``S [B, H, N, P]`` at the chunk start.

    Returns:
        ``y [B, H, L, P]`` and the state at the chunk end.
    """
    b = log_decay.cumsum(-1)  # log of the decay from the chunk start up to t
    decay = masked_exp(b[..., :, None] - b[..., None, :], causal_mask(x.shape[-2], x.device))
    xdt = x * dt[..., None]
    y = (decay * (C @ B.transpose(-1, -2))) @ xdt + torch.exp(b)[..., None] * (C @ state)
    decay_end = torch.exp(b[..., -1:] - b)  # decay from each token to the chunk end
    state = torch.exp(b[..., -1, None, None]) * state + (B * decay_end[..., None]).transpose(-1, -2) @ xdt
    return y, state


def ssd_chunkwise(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    *,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor | None]:
    """SSD over a sequence, parallel inside chunks of ``chunk_size`` tokens and recurrent across chunks.

    Args:
        x: ``[B, T, H, P]`` inputs.
        dt: ``[B, T, H]`` positive step sizes.
        A: ``[H]`` positive decay rates.
        B: ``[B, T, H, N]`` input projections.
        C: ``[B, T, H, N]`` output projections.
        initial_state: ``S [B, H, N, P]`` to continue from; ``None`` means zeros.
        output_final_state: also return the state after the last token.
        chunk_size: tokens per chunk; the last chunk is shorter when ``chunk_size`` does not divide ``T``.

    Returns:
        ``y [B, T, H, P]`` (dtype of ``x``) and the final state, or ``None``.
    """
    batch, length, heads, p_dim = x.shape
    dtype = compute_dtype(x, dt, A, B, C, initial_state)
    if initial_state is None:
        initial_state = ssd_init_state(batch, heads, B.shape[-1], p_dim, device=x.device, dtype=dtype)
    state = initial_state.to(dtype)

    def head_major(t: Tensor) -> Tensor:
        return t.to(dtype).transpose(1, 2)

    xh, dth, Bh, Ch = head_major(x), head_major(dt), head_major(B), head_major(C)
    log_decay = -A.to(dtype)[:, None] * dth
    ys = []
    for start, end in chunk_bounds(length, chunk_size):
        sl = slice(start, end)
        y, state = _ssd_chunk(xh[:, :, sl], dth[:, :, sl], log_decay[:, :, sl], Bh[:, :, sl], Ch[:, :, sl], state)
        ys.append(y)
    y = torch.cat(ys, dim=2).transpose(1, 2).to(x.dtype).contiguous()
    return y, (state if output_final_state else None)
