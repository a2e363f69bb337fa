"""The gated delta rule (Gated DeltaNet's recurrence): the one-token step (the definition), the recurrent and the
chunkwise form.

Per head, with ``alpha_t = exp(g_t)`` (``g <= 0``), ``beta_t`` any real (``(0, 1)``, or ``(0, 2)`` for the variant with
eigenvalues in ``[-1, 1]``) and ``k`` already L2-normalised by the caller::

    S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T      # S: [K, V]
    o_t = S_t^T (scale q_t)

Chunkwise form (the WY / UT-transform form of the gated DeltaNet paper and flash-linear-attention): the update is
``S_t = alpha_t S_{t-1} + k_t u_t^T`` with the "pseudo value" ``u_t = beta_t (v_t - alpha_t S_{t-1}^T k_t)``. With
``G_t`` the cumulative ``g`` from the chunk start and ``S_0`` the carried state, unrolling inside the chunk gives::

    u_t + beta_t sum_{s<t} exp(G_t - G_s) (k_t . k_s) u_s = beta_t v_t - beta_t exp(G_t) S_0^T k_t

a unit lower-triangular system ``(I + diag(beta) A) u = beta v - (beta exp(G) k) S_0`` solved by one triangular
solve (the UT transform). Then ``o_t = exp(G_t) S_0^T q_t + sum_{s<=t} exp(G_t - G_s) (q_t . k_s) u_s`` and
``S_L = exp(G_L) S_0 + sum_s exp(G_L - G_s) k_s u_s^T``. Every exponent is ``<= 0`` (future entries are masked
before ``exp``), so nothing overflows. This module knows nothing of time series.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tsfm.kernels._reference_common import causal_mask, chunk_bounds, compute_dtype, masked_exp


def gated_delta_rule_init_state(
    batch: int,
    heads: int,
    k_dim: int,
    v_dim: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """A fresh gated-delta-rule state, all zeros.

    Args:
        batch: batch size ``B``.
        heads: number of heads ``H``.
        k_dim: query/key width ``K``.
        v_dim: value width ``V``.
        device: device of the state.
        dtype: dtype of the state (float32, or float64 for float64 inputs).

    Returns:
        ``S [B, H, K, V]``.
    """
    return torch.zeros(batch, heads, k_dim, v_dim, device=device, dtype=dtype)


def _default_scale(q: Tensor, scale: float | None) -> float:
    return q.shape[-1] ** -0.5 if scale is None else scale


def gated_delta_rule_step(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor, *, scale: float | None = None
) -> tuple[Tensor, Tensor]:
    """One gated-delta-rule token: the definition that the other forms must match.

    Args:
        q: ``[B, H, K]`` query of this token (multiplied by ``scale`` here).
        k: ``[B, H, K]`` key, expected L2-normalised (not normalised here).
        v: ``[B, H, V]`` value.
        g: ``[B, H]`` log-decay ``<= 0``; the state decays by ``alpha = exp(g)``.
        beta: ``[B, H]`` write strength of the delta rule.
        state: ``S [B, H, K, V]`` before this token; use :func:`gated_delta_rule_init_state` to start.
        scale: multiplies ``q``; defaults to ``K ** -0.5``.

    Returns:
        ``o [B, H, V]`` in the dtype of ``v`` and the state after this token.
    """
    dtype = compute_dtype(q, k, v, g, beta, state)
    q_, k, v_, g, beta, state = (t.to(dtype) for t in (q, k, v, g, beta, state))
    alpha = torch.exp(g)[..., None, None]
    beta = beta[..., None, None]
    k_s = torch.einsum("bhk,bhkv->bhv", k, state)  # what the memory currently returns for k
    state = alpha * (state - beta * k[..., :, None] * k_s[..., None, :]) + beta * k[..., :, None] * v_[..., None, :]
    o = torch.einsum("bhkv,bhk->bhv", state, q_ * _default_scale(q, scale))
    return o.to(v.dtype), state


def gated_delta_rule_recurrent(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    *,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """The gated delta rule as a Python loop over :func:`gated_delta_rule_step` (slow; the spec).

    Args:
        q: ``[B, T, H, K]`` queries.
        k: ``[B, T, H, K]`` keys, expected L2-normalised.
        v: ``[B, T, H, V]`` values.
        g: ``[B, T, H]`` log-decays ``<= 0``.
        beta: ``[B, T, H]`` write strengths.
        scale: multiplies ``q``; defaults to ``K ** -0.5``.
        initial_state: ``S [B, H, K, V]`` to continue from; ``None`` means zeros.
        output_final_state: also return the state after the last token.

    Returns:
        ``o [B, T, H, V]`` (dtype of ``v``) and the final state, or ``None``.
    """
    batch, length, heads, k_dim = q.shape
    state = initial_state
    if state is None:
        dtype = compute_dtype(q, k, v, g, beta)
        state = gated_delta_rule_init_state(batch, heads, k_dim, v.shape[-1], device=q.device, dtype=dtype)
    outs = []
    for t in range(length):
        o, state = gated_delta_rule_step(q[:, t], k[:, t], v[:, t], g[:, t], beta[:, t], state, scale=scale)
        outs.append(o)
    return torch.stack(outs, dim=1), (state if output_final_state else None)


def _gated_delta_chunk(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor
) -> tuple[Tensor, Tensor]:
    """One chunk of ``L`` tokens in the WY / UT-transform form, starting from the carried state.

    Args:
        q: ``[B, H, L, K]`` queries, already scaled (head-major inside the chunk for the matmuls).
        k: ``[B, H, L, K]`` keys.
        v: ``[B, H, L, V]`` values.
        g: ``[B, H, L]`` log-decays.
        beta: ``[B, H, L]`` write strengths.
        state: ``S [B, H, K, V]`` at the chunk start.

    Returns:
        ``o [B, H, L, V]`` and the state at the chunk end.
    """
    length = q.shape[-2]
    G = g.cumsum(-1)  # log of the decay from the chunk start up to t
    log_decay = G[..., :, None] - G[..., None, :]  # [B, H, L(t), L(s)]: log decay from token s to token t
    beta_col = beta[..., None]

    # UT transform: solve (I + diag(beta) A_strict) [U | W] = [beta v | beta exp(G) k] in one triangular solve.
    a_strict = masked_exp(log_decay, causal_mask(length, q.device, strict=True)) * (k @ k.transpose(-1, -2))
    eye = torch.eye(length, dtype=q.dtype, device=q.device)
    rhs = torch.cat([beta_col * v, (beta * torch.exp(G))[..., None] * k], dim=-1)
    sol = torch.linalg.solve_triangular(eye + beta_col * a_strict, rhs, upper=False, unitriangular=True)
    u_v, w = sol.split([v.shape[-1], k.shape[-1]], dim=-1)
    u = u_v - w @ state  # pseudo values u_t = beta_t (v_t - alpha_t S_{t-1}^T k_t)

    attn = masked_exp(log_decay, causal_mask(length, q.device)) * (q @ k.transpose(-1, -2))
    o = attn @ u + torch.exp(G)[..., None] * (q @ state)
    decay_end = torch.exp(G[..., -1:] - G)  # decay from each token to the chunk end
    state = torch.exp(G[..., -1, None, None]) * state + (k * decay_end[..., None]).transpose(-1, -2) @ u
    return o, state


def gated_delta_rule_chunkwise(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    *,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor | None]:
    """The gated delta rule, parallel inside chunks of ``chunk_size`` tokens and recurrent across chunks.

    Args:
        q: ``[B, T, H, K]`` queries.
        k: ``[B, T, H, K]`` keys, expected L2-normalised.
        v: ``[B, T, H, V]`` values.
        g: ``[B, T, H]`` log-decays ``<= 0``.
        beta: ``[B, T, H]`` write strengths.
        scale: multiplies ``q``; defaults to ``K ** -0.5``.
        initial_state: ``S [B, H, K, V]`` to continue from; ``None`` means zeros.
        output_final_state: also return the state after the last token.
        chunk_size: tokens per chunk; the last chunk is shorter when ``chunk_size`` does not divide ``T``.

    Returns:
        ``o [B, T, H, V]`` (dtype of ``v``) and the final state, or ``None``.
    """
    batch, length, heads, k_dim = q.shape
    dtype = compute_dtype(q, k, v, g, beta, initial_state)
    if initial_state is None:
        initial_state = gated_delta_rule_init_state(batch, heads, k_dim, v.shape[-1], device=q.device, dtype=dtype)
    state = initial_state.to(dtype)

    def head_major(t: Tensor) -> Tensor:
        return t.to(dtype).transpose(1, 2)

    qh = head_major(q) * _default_scale(q, scale)
    kh, vh, gh, betah = head_major(k), head_major(v), head_major(g), head_major(beta)
    outs = []
    for start, end in chunk_bounds(length, chunk_size):
        sl = slice(start, end)
        o, state = _gated_delta_chunk(qh[:, :, sl], kh[:, :, sl], vh[:, :, sl], gh[:, :, sl], betah[:, :, sl], state)
        outs.append(o)
    o = torch.cat(outs, dim=2).transpose(1, 2).to(v.dtype).contiguous()
    return o, (state if output_final_state else None)
