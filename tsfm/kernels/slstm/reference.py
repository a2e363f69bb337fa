"""sLSTM (the xLSTM scalar memory with recurrent gates): the one-token step and the recurrent form.

Per head ``h`` and cell, with ``x_gates = W x_t + b`` (the input part of the gate pre-activations, order
``(i, f, z, o)``) and block-diagonal recurrent weights ``R [H, 4, D, D]``::

    (ĩ, f̃, z̃, õ) = x_gates_t + h_{t-1} @ R[h, gate]          # row vector times [D, D], per gate
    m_t = max(ĩ, logsig(f̃) + m_{t-1})                         # stabiliser, carries no gradient
    i' = exp(ĩ - m_t),  f' = exp(logsig(f̃) + m_{t-1} - m_t)
    c_t = f' c_{t-1} + i' tanh(z̃),  n_t = f' n_{t-1} + i',  h_t = sigmoid(õ) c_t / n_t

The gates depend on ``h_{t-1}`` through ``R``, so the recurrence is nonlinear and strictly sequential: there is no
chunkwise form. A fresh state is ``h = c = n = 0, m = -inf``: then ``m_t`` is exactly the largest log-weight of any
token so far, the largest term of ``n_t`` is exactly 1, so ``n_t >= 1`` and ``c_t / n_t`` never divides by zero
(``m_0 = 0`` could let ``n`` underflow to 0 for very negative ``ĩ``). This module knows nothing of time series.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from tsfm.kernels._reference_common import compute_dtype

SLSTMState = tuple[Tensor, Tensor, Tensor, Tensor]
"""``(h, c, n, m)``, each ``[B, H, D]``: hidden output, cell, normaliser, stabiliser."""


def slstm_init_state(
    batch: int,
    heads: int,
    dim: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> SLSTMState:
    """A fresh sLSTM state: ``h = c = n = 0``, ``m = -inf`` (see the module docstring for why ``-inf``).

    Args:
        batch: batch size ``B``.
        heads: number of heads ``H``.
        dim: cells per head ``D``.
        device: device of the state.
        dtype: dtype of the state (float32, or float64 for float64 inputs).

    Returns:
        ``(h, c, n, m)``, each ``[B, H, D]``.
    """
    zeros = [torch.zeros(batch, heads, dim, device=device, dtype=dtype) for _ in range(3)]
    m = torch.full((batch, heads, dim), float("-inf"), device=device, dtype=dtype)
    return zeros[0], zeros[1], zeros[2], m


def slstm_step(x_gates_t: Tensor, R: Tensor, state: SLSTMState) -> tuple[Tensor, SLSTMState]:
    """One sLSTM token: the definition.

    Args:
        x_gates_t: ``[B, H, 4, D]`` input part of the gate pre-activations ``W x_t + b``, gates ``(i, f, z, o)``.
        R: ``[H, 4, D, D]`` recurrent weights; gate ``g`` of head ``h`` adds ``h_{t-1}[b, h, :] @ R[h, g]``.
        state: ``(h, c, n, m)``, each ``[B, H, D]``, before this token; use :func:`slstm_init_state` to start.

    Returns:
        ``h_t [B, H, D]`` in the dtype of ``x_gates_t`` and the state after this token.
    """
    dtype = compute_dtype(x_gates_t, R, *state)
    h, c, n, m = (t.to(dtype) for t in state)
    m = m.detach()
    pre = x_gates_t.to(dtype) + torch.einsum("bhd,hgde->bhge", h, R.to(dtype))
    i, f, z, o = pre.unbind(dim=2)
    logf = F.logsigmoid(f)
    m_new = torch.maximum(i, logf + m).detach()
    i_gate = torch.exp(i - m_new)
    f_gate = torch.exp(logf + m - m_new)
    c = f_gate * c + i_gate * torch.tanh(z)
    n = f_gate * n + i_gate
    h = torch.sigmoid(o) * c / n
    return h.to(x_gates_t.dtype), (h, c, n, m_new)


def slstm_recurrent(
    x_gates: Tensor, R: Tensor, *, initial_state: SLSTMState | None = None, output_final_state: bool = False
) -> tuple[Tensor, SLSTMState | None]:
    """The sLSTM over a sequence as a loop over :func:`slstm_step` (the only form: it is strictly sequential).

    Args:
        x_gates: ``[B, T, H, 4, D]`` input part of the gate pre-activations, gates ``(i, f, z, o)``.
        R: ``[H, 4, D, D]`` block-diagonal recurrent weights.
        initial_state: ``(h, c, n, m)`` to continue from; ``None`` is the fresh state of :func:`slstm_init_state`.
        output_final_state: also return the state after the last token.

    Returns:
        ``h [B, T, H, D]`` (dtype of ``x_gates``) and the final state, or ``None``.
    """
    batch, length, heads, _, dim = x_gates.shape
    state = initial_state
    if state is None:
        state = slstm_init_state(batch, heads, dim, device=x_gates.device, dtype=compute_dtype(x_gates, R))
    hs = []
    for t in range(length):
        h, state = slstm_step(x_gates[:, t], R, state)
        hs.append(h)
    return torch.stack(hs, dim=1), (state if output_final_state else None)
