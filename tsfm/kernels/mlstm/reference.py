"""mLSTM (the xLSTM matrix memory): the one-token step (the definition), the recurrent form and the chunkwise form.

Per head, with ``q`` already multiplied by ``scale`` and gate pre-activations ``ĩ`` (input) and ``f̃`` (forget)::

    m_t = max(logsig(f̃_t) + m_{t-1}, ĩ_t)                      # stabiliser, carries no gradient
    f'  = exp(logsig(f̃_t) + m_{t-1} - m_t),  i' = exp(ĩ_t - m_t)
    C_t = f' C_{t-1} + i' k_t v_t^T,          n_t = f' n_{t-1} + i' k_t
    h_t = C_t^T q_t / (max(|n_t^T q_t|, exp(-m_t)) + 1e-6)

A fresh state is ``C = 0, n = 0, m = -inf``. With ``m_0 = -inf`` the stabiliser is exactly the largest log-weight of
any token seen so far, ``m_t = max_s (ĩ_s + sum_{s<j<=t} logsig(f̃_j))``: the first step gives ``m_1 = ĩ_1``,
``i' = 1``, ``f' = 0`` (the forget gate of step 1 has nothing to forget and leaves no trace, not even through the
``1e-6``), and the largest term of ``C`` and ``n`` always has weight exactly 1, so nothing underflows or overflows.
``m_0 = 0`` would instead mix the spurious ``logsig(f̃_1)`` into the stabiliser. ``exp(-inf) = 0`` and its
derivative is 0, so the forward pass and gradients stay finite. ``initial_state=None`` means this fresh state.

The chunkwise form uses the closed form of the same stabiliser inside a chunk (``b`` the cumulative sum of
``logsig(f̃)`` from the chunk start, ``m_0`` the carried stabiliser)::

    m_t = b_t + max(m_0, max_{s<=t} (ĩ_s - b_s))

so it matches the recurrent form to rounding, even through the ``1e-6`` epsilon. Only local cumulative sums are
used, so float32 keeps its precision over long sequences. This module knows nothing of time series.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from tsfm.kernels._reference_common import causal_mask, chunk_bounds, compute_dtype, masked_exp

MLSTMState = tuple[Tensor, Tensor, Tensor]
"""``(C [B, H, K, V], n [B, H, K], m [B, H])``: matrix memory, normaliser, stabiliser."""

EPS = 1e-6
"""Added to the denominator of the read-out, as in the xLSTM reference."""


def mlstm_init_state(
    batch: int,
    heads: int,
    k_dim: int,
    v_dim: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> MLSTMState:
    """A fresh mLSTM state: ``C = 0``, ``n = 0``, ``m = -inf`` (see the module docstring for why ``-inf``).

    Args:
        batch: batch size ``B``.
        heads: number of heads ``H``.
        k_dim: query/key width ``K``.
        v_dim: value width ``V``.
        device: device of the state tensors.
        dtype: dtype of the state (float32, or float64 for float64 inputs).

    Returns:
        ``(C [B, H, K, V], n [B, H, K], m [B, H])``.
    """
    c = torch.zeros(batch, heads, k_dim, v_dim, device=device, dtype=dtype)
    n = torch.zeros(batch, heads, k_dim, device=device, dtype=dtype)
    m = torch.full((batch, heads), float("-inf"), device=device, dtype=dtype)
    return c, n, m


def _default_scale(q: Tensor, scale: float | None) -> float:
    return q.shape[-1] ** -0.5 if scale is None else scale


def mlstm_step(
    q: Tensor, k: Tensor, v: Tensor, i: Tensor, f: Tensor, state: MLSTMState, *, scale: float | None = None
) -> tuple[Tensor, MLSTMState]:
    """One mLSTM token: the definition that the other forms must match.

    Args:
        q: ``[B, H, K]`` query of this token (multiplied by ``scale`` here).
        k: ``[B, H, K]`` key written into the memory.
        v: ``[B, H, V]`` value written into the memory.
        i: ``[B, H]`` input-gate pre-activation ``ĩ`` (the gate is ``exp(ĩ)``).
        f: ``[B, H]`` forget-gate pre-activation ``f̃`` (the gate is ``sigmoid(f̃)``).
        state: ``(C [B, H, K, V], n [B, H, K], m [B, H])`` before this token; use :func:`mlstm_init_state` to start.
        scale: multiplies ``q``; defaults to ``K ** -0.5``.

    Returns:
        ``h [B, H, V]`` in the dtype of ``v`` and the state after this token (float32, or float64 for float64 inputs).
    """
    out_dtype, dtype = v.dtype, compute_dtype(q, k, v, i, f, *state)
    q, k, v, i, f = (t.to(dtype) for t in (q, k, v, i, f))
    c, n, m = (t.to(dtype) for t in state)
    q = q * _default_scale(q, scale)
    m = m.detach()

    logf = F.logsigmoid(f)
    m_new = torch.maximum(logf + m, i).detach()
    f_gate = torch.exp(logf + m - m_new)
    i_gate = torch.exp(i - m_new)
    c = f_gate[..., None, None] * c + i_gate[..., None, None] * k[..., :, None] * v[..., None, :]
    n = f_gate[..., None] * n + i_gate[..., None] * k
    num = torch.einsum("bhkv,bhk->bhv", c, q)
    den = torch.einsum("bhk,bhk->bh", n, q)
    h = num / (torch.maximum(den.abs(), torch.exp(-m_new)) + EPS)[..., None]
    return h.to(out_dtype), (c, n, m_new)


def mlstm_recurrent(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    i: Tensor,
    f: Tensor,
    *,
    scale: float | None = None,
    initial_state: MLSTMState | None = None,
    output_final_state: bool = False,
) -> tuple[Tensor, MLSTMState | None]:
    """The mLSTM over a sequence as a Python loop over :func:`mlstm_step` (slow; the spec the others are tested on).

    Args:
        q: ``[B, T, H, K]`` queries.
        k: ``[B, T, H, K]`` keys.
        v: ``[B, T, H, V]`` values.
        i: ``[B, T, H]`` input-gate pre-activations.
        f: ``[B, T, H]`` forget-gate pre-activations.
        scale: multiplies ``q``; defaults to ``K ** -0.5``.
        initial_state: ``(C, n, m)`` to continue from; ``None`` is the fresh state of :func:`mlstm_init_state`.
        output_final_state: also return the state after the last token.

    Returns:
        ``h [B, T, H, V]`` (dtype of ``v``) and the final state, or ``None``.
    """
    batch, length, heads, k_dim = q.shape
    if initial_state is None:
        initial_state = mlstm_init_state(
            batch, heads, k_dim, v.shape[-1], device=q.device, dtype=compute_dtype(q, k, v, i, f)
        )
    state = initial_state
    hs = []
    for t in range(length):
        h, state = mlstm_step(q[:, t], k[:, t], v[:, t], i[:, t], f[:, t], state, scale=scale)
        hs.append(h)
    return torch.stack(hs, dim=1), (state if output_final_state else None)


def _mlstm_chunk(
    q: Tensor, k: Tensor, v: Tensor, i: Tensor, logf: Tensor, state: MLSTMState
) -> tuple[Tensor, MLSTMState]:
    """One chunk of ``L`` tokens: parallel inside, starting from the carried state.

    Args:
        q: ``[B, H, L, K]`` queries, already scaled (head-major inside the chunk for the matmuls).
        k: ``[B, H, L, K]`` keys.
        v: ``[B, H, L, V]`` values.
        i: ``[B, H, L]`` input-gate pre-activations.
        logf: ``[B, H, L]`` ``logsig(f̃)``, the log forget gates.
        state: ``(C [B, H, K, V], n [B, H, K], m [B, H])`` at the chunk start.

    Returns:
        ``h [B, H, L, V]`` and the state at the chunk end.
    """
    c0, n0, m0 = state
    m0 = m0.detach()
    b = logf.cumsum(-1)  # log of the product of forget gates from the chunk start up to t
    with torch.no_grad():
        m = b + torch.maximum(m0[..., None], torch.cummax(i - b, dim=-1).values)
    # Log-weight, relative to the stabiliser, with which token s sits in the memory read at token t (s <= t).
    log_w = (i - b)[..., None, :] + (b - m)[..., :, None]
    w = masked_exp(log_w, causal_mask(q.shape[-2], q.device))
    decay0 = torch.exp(b + m0[..., None] - m)  # weight of the carried state at token t (0 for a fresh state)

    wqk = w * (q @ k.transpose(-1, -2))
    num = wqk @ v + decay0[..., None] * (q @ c0)
    den = wqk.sum(-1) + decay0 * (q @ n0[..., None])[..., 0]
    h = num / (torch.maximum(den.abs(), torch.exp(-m)) + EPS)[..., None]

    w_end = torch.exp(i - b + (b - m)[..., -1:])  # weight of each token in the state at the chunk end
    kw = k * w_end[..., None]
    c = decay0[..., -1, None, None] * c0 + kw.transpose(-1, -2) @ v
    n = decay0[..., -1, None] * n0 + kw.sum(-2)
    return h, (c, n, m[..., -1].contiguous())


def mlstm_chunkwise(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    i: Tensor,
    f: Tensor,
    *,
    scale: float | None = None,
    initial_state: MLSTMState | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[Tensor, MLSTMState | None]:
    """The mLSTM over a sequence, parallel inside chunks of ``chunk_size`` tokens and recurrent across chunks.

    Args:
        q: ``[B, T, H, K]`` queries.
        k: ``[B, T, H, K]`` keys.
        v: ``[B, T, H, V]`` values.
        i: ``[B, T, H]`` input-gate pre-activations.
        f: ``[B, T, H]`` forget-gate pre-activations.
        scale: multiplies ``q``; defaults to ``K ** -0.5``.
        initial_state: ``(C, n, m)`` to continue from; ``None`` is the fresh state of :func:`mlstm_init_state`.
        output_final_state: also return the state after the last token.
        chunk_size: tokens per chunk; the last chunk is shorter when ``chunk_size`` does not divide ``T``.

    Returns:
        ``h [B, T, H, V]`` (dtype of ``v``) and the final state, or ``None``.
    """
    batch, length, heads, k_dim = q.shape
    dtype = compute_dtype(q, k, v, i, f, *(initial_state or ()))
    if initial_state is None:
        initial_state = mlstm_init_state(batch, heads, k_dim, v.shape[-1], device=q.device, dtype=dtype)
    state = tuple(s.to(dtype) for s in initial_state)

    def head_major(t: Tensor) -> Tensor:
        return t.to(dtype).transpose(1, 2)

    qh = head_major(q) * _default_scale(q, scale)
    kh, vh, ih = head_major(k), head_major(v), head_major(i)
    logf = F.logsigmoid(head_major(f))
    hs = []
    for start, end in chunk_bounds(length, chunk_size):
        sl = slice(start, end)
        h, state = _mlstm_chunk(qh[:, :, sl], kh[:, :, sl], vh[:, :, sl], ih[:, :, sl], logf[:, :, sl], state)
        hs.append(h)
    h = torch.cat(hs, dim=2).transpose(1, 2).to(v.dtype).contiguous()
    return h, (state if output_final_state else None)
