"""The gated delta rule's chunkwise Triton op: forward, backward as chains of named stages, and the autograd function.

The math is that of :func:`tsfm.kernels.gated_delta_rule.reference.gated_delta_rule_chunkwise` (the executable
spec). Per head and chunk of ``L`` tokens, with ``q`` already scaled, ``G`` the cumulative ``g`` from the chunk
start, ``S_0 [K, V]`` the carried state and every log-weight masked to ``-inf`` *before* ``exp`` (all exponents
are ``<= 0``)::

    A[t, s] = exp(G_t - G_s) (k_t . k_s)                  for s < t  (0 elsewhere)
    T       = (I + diag(beta) A)^-1                        unit lower triangular (the UT transform)
    W = T (beta exp(G) k),  U = T (beta v)                 depend on k, v, g, beta only, not on the state
    u = U - W S_0                                          pseudo values u_t = beta_t (v_t - alpha_t S_{t-1}^T k_t)
    o = exp(G) (q S_0) + P u,  P[t, s] = exp(G_t - G_s) (q_t . k_s) for s <= t
    S_L = exp(G_L) S_0 + (exp(G_L - G) k)^T u

Backward (``dO`` the output gradient, ``dS_L`` that of the chunk-end state), derived by hand and checked against
autograd of the float64 recurrence::

    du  = (exp(G_L - G) k) dS_L + P^T dO
    dS_0 = exp(G_L) dS_L + (exp(G) q)^T dO - W^T du                      (carried to the previous chunk)
    dw  = T^T du,  r = v - exp(G) (k S_0)  (so u = T (beta r)),  dr = beta dw,  dv = dr,  dbeta = rowsum(dw r)
    dM  = -(dw u^T) strictly below the diagonal   (M = I + diag(beta) A, T = M^-1: dM = -T^T dT T^T)
    dbeta += rowsum(dM A),  dA = beta dM,  dk += (dA E) k + (dA E)^T k,  dq, dk from P and the S_0 terms,
    dG from every exp(.) (row sums minus column sums of dlogw), dg = reverse cumsum of dG within the chunk.

Stages (FLA's layout: the chunk-local work is parallel over chunks, only the ``K x V`` state passes are sequential),
forward :func:`_prepare` then :func:`_state_pass`, backward :func:`_state_grad_pass` then :func:`_chunk_grads`:

* :func:`_prepare` (grid ``chunks x batch*heads``): ``A``, then ``T`` (16 x 16 diagonal blocks by forward
  substitution, the rest by block products, see :func:`_unit_lower_inverse`), then ``W`` and ``U``; writes them (and
  ``T`` for the backward) in float32. Nothing in it depends on the state, so it runs on every chunk at once.
* :func:`_state_pass` (grid ``batch*heads x value blocks``): walks the chunks in order keeping ``S [K, BV]`` on
  chip, writes ``o``, the final state and, for the backward, the state at each chunk start. The value width is
  split over programs when ``batch * heads`` alone cannot fill the GPU (every step above is separable in the value
  columns).
* :func:`_state_grad_pass` (grid ``batch*heads x value blocks``): walks the chunks in reverse keeping ``dS`` on chip
  and writes the gradient of the state at each chunk end, and the initial state's gradient.
* :func:`_chunk_grads` (grid ``chunks x batch*heads``): from a chunk's start state and end-state gradient,
  recomputes the chunk's forward and writes ``dq, dk, dv, dg, dbeta``.

Ragged tails are masked, never padded in memory: a token past ``T`` reads ``q = k = v = 0``, ``g = 0`` (no decay)
and ``beta = 0`` (no write), so its row of ``T`` is the identity's, its pseudo value is 0 and the state at the
chunk's last row is the state after the last real token.

Sizes: chunks of at most 64 tokens, 32 when ``K`` or ``V`` is 128 or more. The heaviest kernel in shared memory is
the chunk-local backward (full ``K`` and ``V``, float32 operands); at ``K = V = 128`` and 32 tokens its operands are
``S_0``, ``dS_L`` (64 KB each) and a few ``[32, 128]`` tiles (16 KB each): about 130-190 KB live at most.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from tsfm.kernels._triton_common import block, chunk_block, contiguous, dot_precision
from tsfm.kernels._triton_common import last_row as _last

GatedDeltaRuleSaved = tuple[Tensor, Tensor, Tensor]
"""What the forward keeps for the backward: ``T`` per chunk ``[B, T, H, BT]``, ``W [B, T, H, K]`` (float32) and the
state at each chunk start ``[B, H, NC, K, V]``."""


@triton.jit
def _unit_lower_inverse(b_n, BT: tl.constexpr, PRECISION: tl.constexpr):
    """``(I - N)^-1`` for a strictly lower-triangular ``[BT, BT]`` tile ``N`` (``BT`` a multiple of 16, at most 64).

    The 16 x 16 diagonal blocks ``D`` are inverted together, as a ``[BT / 16, 16, 16]`` stack, by forward
    substitution (15 rank-one updates, each one column of ``D`` times one final row of the inverse); the rest
    follows from ``I - N = (I - D)(I - Y)`` with ``Y = (I - D)^-1 O`` (``O`` the part below the diagonal blocks),
    strictly block-lower, so ``Y^4 = 0`` for up to 4 blocks and ``(I - N)^-1 = (I + Y)(I + Y^2)(I - D)^-1``: four
    matrix products (tensor cores under tf32) instead of a loop over 64 rows. The products are the terms of block
    forward substitution (paths of at most three blocks), so the accuracy is that of the substitution (a plain
    Neumann series over 64 rows would cancel huge terms when keys repeat).
    """
    NB: tl.constexpr = BT // 16
    o_b = tl.arange(0, NB)
    o_i = tl.arange(0, 16)
    same = o_b[:, None, None, None] == o_b[None, None, :, None]  # [NB, 1, NB, 1]: a diagonal block
    b_d = tl.sum(tl.where(same, tl.reshape(b_n, [NB, 16, NB, 16]), 0.0), axis=2)  # [NB, 16, 16]
    b_x = tl.zeros([NB, 16, 16], dtype=tl.float32) + tl.where(o_i[:, None] == o_i[None, :], 1.0, 0.0)[None, :, :]
    for j in range(15):
        b_col = tl.sum(tl.where(o_i[None, None, :] == j, b_d, 0.0), axis=2)  # D[:, j] of each block
        b_row = tl.sum(tl.where(o_i[None, :, None] == j, b_x, 0.0), axis=1)  # final row j of each block's inverse
        b_x += b_col[:, :, None] * b_row[:, None, :]
    b_dinv = tl.reshape(tl.where(same, b_x[:, :, None, :], 0.0), [BT, BT])
    o_t = tl.arange(0, BT)
    below = (o_t[:, None] // 16) > (o_t[None, :] // 16)
    b_y = tl.dot(b_dinv, tl.where(below, b_n, 0.0), input_precision=PRECISION)
    b_z = b_y + tl.where(o_t[:, None] == o_t[None, :], 1.0, 0.0)
    b_z += tl.dot(b_z, tl.dot(b_y, b_y, input_precision=PRECISION), input_precision=PRECISION)
    return tl.dot(b_z, b_dinv, input_precision=PRECISION)


@triton.jit
def _gated_delta_rule_prepare_kernel(
    k, v, g, beta,  # inputs [B, T, H, K], [B, T, H, V], [B, T, H], [B, T, H]
    w, u, tm,  # outputs W [B, T, H, K], U [B, T, H, V], T [B, T, H, BT] (float32)
    T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    STORE_T: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    i_c = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    t = i_c * BT + o_t
    mask_t = t < T
    mask_tk = mask_t[:, None] & (o_k < K)[None, :]
    mask_tv = mask_t[:, None] & (o_v < V)[None, :]
    row_k = (i_b * T + t) * H * K + i_h * K
    row_v = (i_b * T + t) * H * V + i_h * V
    gate = (i_b * T + t) * H + i_h

    b_k = tl.load(k + row_k[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    b_g = tl.load(g + gate, mask=mask_t, other=0.0).to(tl.float32)
    b_beta = tl.load(beta + gate, mask=mask_t, other=0.0).to(tl.float32)
    b_G = tl.cumsum(b_g, axis=0)

    # N = -diag(beta) A, strictly lower; T = (I + diag(beta) A)^-1 = (I - N)^-1.
    strict = o_t[:, None] > o_t[None, :]
    b_e = tl.exp(tl.where(strict, b_G[:, None] - b_G[None, :], float("-inf")))
    b_n = -b_beta[:, None] * b_e * tl.dot(b_k, tl.trans(b_k), input_precision=PRECISION)
    b_tm = _unit_lower_inverse(b_n, BT, PRECISION)

    b_w = tl.dot(b_tm, b_k * (b_beta * tl.exp(b_G))[:, None], input_precision=PRECISION)
    b_u = tl.dot(b_tm, b_v * b_beta[:, None], input_precision=PRECISION)
    tl.store(w + row_k[:, None] + o_k[None, :], b_w, mask=mask_tk)
    tl.store(u + row_v[:, None] + o_v[None, :], b_u, mask=mask_tv)
    if STORE_T:
        row_t = (i_b * T + t) * H * BT + i_h * BT
        tl.store(tm + row_t[:, None] + o_t[None, :], b_tm, mask=mask_t[:, None])


@triton.jit
def _gated_delta_rule_fwd_kernel(
    q, k, g, w, u, s0,  # inputs, the prepared W [B, T, H, K] and U [B, T, H, V], initial state [B, H, K, V]
    o, st, hs,  # output [B, T, H, V], final state [B, H, K, V], state at each chunk start [B, H, NC, K, V]
    scale, T, NC,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    HAS_INIT: tl.constexpr, STORE_FINAL: tl.constexpr, STORE_CHUNKS: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    i_bh = tl.program_id(0)
    i_v = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    mask_k = o_k < K
    mask_v = o_v < V
    mask_kv = mask_k[:, None] & mask_v[None, :]
    causal = o_t[:, None] >= o_t[None, :]

    if HAS_INIT:
        S = tl.load(s0 + i_bh * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0).to(tl.float32)
    else:
        S = tl.zeros([BK, BV], dtype=tl.float32)

    for i_c in range(NC):
        t = i_c * BT + o_t
        mask_t = t < T
        mask_tk = mask_t[:, None] & mask_k[None, :]
        mask_tv = mask_t[:, None] & mask_v[None, :]
        row_k = (i_b * T + t) * H * K + i_h * K
        row_v = (i_b * T + t) * H * V + i_h * V
        b_q = tl.load(q + row_k[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_q = b_q * scale
        b_k = tl.load(k + row_k[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_w = tl.load(w + row_k[:, None] + o_k[None, :], mask=mask_tk, other=0.0)
        b_u = tl.load(u + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0)
        b_g = tl.load(g + (i_b * T + t) * H + i_h, mask=mask_t, other=0.0).to(tl.float32)

        if STORE_CHUNKS:
            tl.store(hs + (i_bh * NC + i_c) * K * V + o_k[:, None] * V + o_v[None, :], S, mask=mask_kv)

        b_G = tl.cumsum(b_g, axis=0)
        g_end = _last(b_G, o_t, BT)
        b_u -= tl.dot(b_w, S, input_precision=PRECISION)  # pseudo values u = U - W S_0
        b_p = tl.dot(b_q, tl.trans(b_k), input_precision=PRECISION)
        b_p *= tl.exp(tl.where(causal, b_G[:, None] - b_G[None, :], float("-inf")))
        b_o = tl.exp(b_G)[:, None] * tl.dot(b_q, S, input_precision=PRECISION)
        b_o += tl.dot(b_p, b_u, input_precision=PRECISION)
        tl.store(o + row_v[:, None] + o_v[None, :], b_o.to(o.dtype.element_ty), mask=mask_tv)

        b_kd = b_k * tl.exp(g_end - b_G)[:, None]
        S = tl.exp(g_end) * S + tl.dot(tl.trans(b_kd), b_u, input_precision=PRECISION)

    if STORE_FINAL:
        tl.store(st + i_bh * K * V + o_k[:, None] * V + o_v[None, :], S, mask=mask_kv)


@triton.jit
def _gated_delta_rule_bwd_state_kernel(
    q, k, g, w, do, dst,  # inputs, W, output gradient, final-state gradient [B, H, K, V]
    dhs, ds0,  # gradient of the state at each chunk end [B, H, NC, K, V], initial state's gradient [B, H, K, V]
    scale, T, NC,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    HAS_DFINAL: tl.constexpr, HAS_INIT: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    i_bh = tl.program_id(0)
    i_v = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    mask_k = o_k < K
    mask_v = o_v < V
    mask_kv = mask_k[:, None] & mask_v[None, :]
    causal = o_t[:, None] >= o_t[None, :]

    if HAS_DFINAL:
        dS = tl.load(dst + i_bh * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0).to(tl.float32)
    else:
        dS = tl.zeros([BK, BV], dtype=tl.float32)

    for j in range(NC):
        i_c = NC - 1 - j
        tl.store(dhs + (i_bh * NC + i_c) * K * V + o_k[:, None] * V + o_v[None, :], dS, mask=mask_kv)
        t = i_c * BT + o_t
        mask_t = t < T
        mask_tk = mask_t[:, None] & mask_k[None, :]
        mask_tv = mask_t[:, None] & mask_v[None, :]
        row_k = (i_b * T + t) * H * K + i_h * K
        row_v = (i_b * T + t) * H * V + i_h * V
        b_q = tl.load(q + row_k[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_q = b_q * scale
        b_k = tl.load(k + row_k[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_w = tl.load(w + row_k[:, None] + o_k[None, :], mask=mask_tk, other=0.0)
        b_do = tl.load(do + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
        b_g = tl.load(g + (i_b * T + t) * H + i_h, mask=mask_t, other=0.0).to(tl.float32)

        b_G = tl.cumsum(b_g, axis=0)
        g_end = _last(b_G, o_t, BT)
        b_p = tl.dot(b_q, tl.trans(b_k), input_precision=PRECISION)
        b_p *= tl.exp(tl.where(causal, b_G[:, None] - b_G[None, :], float("-inf")))
        b_kd = b_k * tl.exp(g_end - b_G)[:, None]
        # du = kd dS_L + P^T dO;  dS_0 = exp(G_L) dS_L + (exp(G) q)^T dO - W^T du.
        b_du = tl.dot(b_kd, dS, input_precision=PRECISION)
        b_du += tl.dot(tl.trans(b_p), b_do, input_precision=PRECISION)
        b_qe = b_q * tl.exp(b_G)[:, None]
        dS = tl.exp(g_end) * dS + tl.dot(tl.trans(b_qe), b_do, input_precision=PRECISION)
        dS -= tl.dot(tl.trans(b_w), b_du, input_precision=PRECISION)

    if HAS_INIT:
        tl.store(ds0 + i_bh * K * V + o_k[:, None] * V + o_v[None, :], dS, mask=mask_kv)


@triton.jit
def _gated_delta_rule_bwd_local_kernel(
    q, k, v, g, beta, tm, hs, dhs, do,  # inputs, T, chunk-start states, chunk-end state gradients, dO
    dq, dk, dv, dg, dbeta,  # gradients of the inputs
    scale, T, NC,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    i_c = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    mask_k = o_k < K
    mask_v = o_v < V
    mask_kv = mask_k[:, None] & mask_v[None, :]
    t = i_c * BT + o_t
    mask_t = t < T
    mask_tk = mask_t[:, None] & mask_k[None, :]
    mask_tv = mask_t[:, None] & mask_v[None, :]
    row_k = (i_b * T + t) * H * K + i_h * K
    row_v = (i_b * T + t) * H * V + i_h * V
    row_t = (i_b * T + t) * H * BT + i_h * BT
    gate = (i_b * T + t) * H + i_h
    state = (i_bh * NC + i_c) * K * V + o_k[:, None] * V + o_v[None, :]

    # Statements are ordered so that few [BT, K] / [BT, V] tiles are live at once (loads near their first use,
    # stores as soon as a gradient is final): at K = V = 128 the two [K, V] states already take most registers.
    b_k = tl.load(k + row_k[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_g = tl.load(g + gate, mask=mask_t, other=0.0).to(tl.float32)
    b_beta = tl.load(beta + gate, mask=mask_t, other=0.0).to(tl.float32)
    causal = o_t[:, None] >= o_t[None, :]
    strict = o_t[:, None] > o_t[None, :]
    b_G = tl.cumsum(b_g, axis=0)
    b_eg = tl.exp(b_G)
    g_end = _last(b_G, o_t, BT)
    b_e = tl.exp(tl.where(causal, b_G[:, None] - b_G[None, :], float("-inf")))

    # Recompute the chunk's pseudo values u = T (beta r), r = v - exp(G) (k S_0).
    S0 = tl.load(hs + state, mask=mask_kv, other=0.0)
    b_r = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    b_r -= b_eg[:, None] * tl.dot(b_k, S0, input_precision=PRECISION)
    b_tm = tl.load(tm + row_t[:, None] + o_t[None, :], mask=mask_t[:, None], other=0.0)
    b_u = tl.dot(b_tm, b_r * b_beta[:, None], input_precision=PRECISION)

    # Chunk-end state S_L = exp(G_L) S_0 + kd^T u, kd = exp(G_L - G) k.
    dSe = tl.load(dhs + state, mask=mask_kv, other=0.0)
    b_dec = tl.exp(g_end - b_G)
    b_kd = b_k * b_dec[:, None]
    b_du = tl.dot(b_kd, dSe, input_precision=PRECISION)
    b_dkd = tl.dot(b_u, tl.trans(dSe), input_precision=PRECISION)
    b_dk = b_dkd * b_dec[:, None]
    b_x = tl.sum(b_kd * b_dkd, axis=1)
    b_dG = -b_x
    dg_end = tl.sum(b_x, axis=0) + tl.exp(g_end) * tl.sum(tl.sum(S0 * dSe, axis=1), axis=0)

    # Output o = exp(G) (q S_0) + P u, P = E * (q k^T).
    b_q = tl.load(q + row_k[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_q = b_q * scale
    b_do = tl.load(do + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    b_p = tl.dot(b_q, tl.trans(b_k), input_precision=PRECISION) * b_e
    b_du += tl.dot(tl.trans(b_p), b_do, input_precision=PRECISION)
    b_dq = tl.dot(b_do, tl.trans(S0), input_precision=PRECISION) * b_eg[:, None]
    b_dG += tl.sum(b_dq * b_q, axis=1)
    b_dp = tl.where(causal, tl.dot(b_do, tl.trans(b_u), input_precision=PRECISION), 0.0)
    b_dpe = b_dp * b_e
    b_dq += tl.dot(b_dpe, b_k, input_precision=PRECISION)
    tl.store(dq + row_k[:, None] + o_k[None, :], (b_dq * scale).to(dq.dtype.element_ty), mask=mask_tk)
    b_dk += tl.dot(tl.trans(b_dpe), b_q, input_precision=PRECISION)
    b_z = b_dp * b_p
    b_dG += tl.sum(b_z, axis=1) - tl.sum(b_z, axis=0)

    # UT transform u = T (beta r), T = M^-1, M = I + diag(beta) A: dw = T^T du, dM = -dw u^T (strictly lower).
    b_dw = tl.dot(tl.trans(b_tm), b_du, input_precision=PRECISION)
    b_dbeta = tl.sum(b_dw * b_r, axis=1)
    b_dr = b_dw * b_beta[:, None]
    tl.store(dv + row_v[:, None] + o_v[None, :], b_dr.to(dv.dtype.element_ty), mask=mask_tv)
    b_x2 = tl.dot(b_dr, tl.trans(S0), input_precision=PRECISION)
    b_dk -= b_eg[:, None] * b_x2
    b_dG -= b_eg * tl.sum(b_k * b_x2, axis=1)
    b_dm = -tl.where(strict, tl.dot(b_dw, tl.trans(b_u), input_precision=PRECISION), 0.0)
    b_es = tl.where(strict, b_e, 0.0)
    b_a = tl.dot(b_k, tl.trans(b_k), input_precision=PRECISION) * b_es
    b_dbeta += tl.sum(b_dm * b_a, axis=1)
    tl.store(dbeta + gate, b_dbeta.to(dbeta.dtype.element_ty), mask=mask_t)
    b_da = b_dm * b_beta[:, None]
    b_dkk = b_da * b_es
    b_dk += tl.dot(b_dkk, b_k, input_precision=PRECISION)
    b_dk += tl.dot(tl.trans(b_dkk), b_k, input_precision=PRECISION)
    tl.store(dk + row_k[:, None] + o_k[None, :], b_dk.to(dk.dtype.element_ty), mask=mask_tk)
    b_z = b_da * b_a
    b_dG += tl.sum(b_z, axis=1) - tl.sum(b_z, axis=0)

    # G = cumsum(g) (G_L is the last row's): dg_t = sum_{t' >= t} dG_t'.
    b_dG += tl.where(o_t == BT - 1, dg_end, 0.0)
    b_dg = tl.sum(b_dG, axis=0) - tl.cumsum(b_dG, axis=0) + b_dG
    tl.store(dg + gate, b_dg.to(dg.dtype.element_ty), mask=mask_t)


def _chunk(length: int, chunk_size: int, bk: int, bv: int) -> int:
    """Tokens per chunk: ``chunk_size`` rounded (:func:`tsfm.kernels._triton_common.chunk_block`), at most 64 (the
    triangular solve works on 16 x 16 blocks, at most four), at most 32 when a state tile is 128 wide so that the
    chunk-local backward, which holds ``S_0`` and ``dS_L`` whole, stays within shared memory (sm_90)."""
    bt = min(chunk_block(length, chunk_size), 64)
    return min(bt, 32) if max(bk, bv) >= 128 else bt


def _value_block(batch_heads: int, bv_full: int) -> int:
    """Value columns per program of the sequential kernels: halved (down to 32) while ``batch * heads`` times the
    number of value blocks is below 256 programs (about two per SM of an H200), so short batches still fill the GPU.
    Each value block recomputes ``q k^T``, the price of the extra parallelism."""
    bv = bv_full
    while bv > 32 and batch_heads * (bv_full // bv) < 256:
        bv //= 2
    return bv


def _num_warps(bk: int, bv: int) -> int:
    return 8 if bk * bv >= 128 * 128 else 4


def _prepare(
    *, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, bt: int, precision: str, store_t: bool
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Stage 1 of the forward, every chunk at once: ``W`` and ``U`` (float32) and, with ``store_t``, the UT
    transform ``T`` per chunk (``[B, T, H, BT]``) for the backward."""
    batch, length, heads, k_dim = k.shape
    v_dim = v.shape[-1]
    bk, bv = block(k_dim), block(v_dim)
    dev, f32 = k.device, torch.float32
    w = torch.empty(batch, length, heads, k_dim, device=dev, dtype=f32)
    u = torch.empty(batch, length, heads, v_dim, device=dev, dtype=f32)
    tm = torch.empty(batch, length, heads, bt, device=dev, dtype=f32) if store_t else None
    _gated_delta_rule_prepare_kernel[(triton.cdiv(length, bt), batch * heads)](
        k=k, v=v, g=g, beta=beta, w=w, u=u, tm=w if tm is None else tm, T=length,
        H=heads, K=k_dim, V=v_dim, BT=bt, BK=bk, BV=bv, STORE_T=store_t, PRECISION=precision,
        num_warps=_num_warps(bk, bv),
    )  # fmt: skip
    return w, u, tm


def _state_pass(
    *, q: Tensor, k: Tensor, g: Tensor, w: Tensor, u: Tensor, initial_state: Tensor | None, scale: float, bt: int,
    precision: str, output_final_state: bool, store_chunks: bool, out_dtype: torch.dtype,
) -> tuple[Tensor, Tensor | None, Tensor | None]:  # fmt: skip
    """Stage 2 of the forward, the chunks in order: ``o`` (in ``out_dtype``), the final state (if asked) and the
    chunk-start states ``[B, H, NC, K, V]`` (if ``store_chunks``)."""
    batch, length, heads, k_dim = q.shape
    v_dim = u.shape[-1]
    bk = block(k_dim)
    bv = _value_block(batch * heads, block(v_dim))
    n_chunks = triton.cdiv(length, bt)
    dev, f32 = q.device, torch.float32
    o = torch.empty(batch, length, heads, v_dim, device=dev, dtype=out_dtype)
    final = torch.empty(batch, heads, k_dim, v_dim, device=dev, dtype=f32) if output_final_state else None
    hs = torch.empty(batch, heads, n_chunks, k_dim, v_dim, device=dev, dtype=f32) if store_chunks else None
    _gated_delta_rule_fwd_kernel[(batch * heads, triton.cdiv(v_dim, bv))](
        q=q, k=k, g=g, w=w, u=u, s0=w if initial_state is None else initial_state,
        o=o, st=w if final is None else final, hs=w if hs is None else hs,
        scale=scale, T=length, NC=n_chunks, H=heads, K=k_dim, V=v_dim, BT=bt, BK=bk, BV=bv,
        HAS_INIT=initial_state is not None, STORE_FINAL=output_final_state, STORE_CHUNKS=store_chunks,
        PRECISION=precision, num_warps=_num_warps(bk, bv), num_stages=2,
    )  # fmt: skip
    return o, final, hs


def _state_grad_pass(
    *, q: Tensor, k: Tensor, g: Tensor, w: Tensor, do: Tensor, hs: Tensor, d_final: Tensor | None, scale: float,
    bt: int, precision: str, has_init: bool,
) -> tuple[Tensor, Tensor | None]:  # fmt: skip
    """Stage 1 of the backward, the chunks in reverse: the gradient of each chunk's end state and the initial
    state's gradient (``None`` without an initial state)."""
    batch, length, heads, k_dim = q.shape
    v_dim = hs.shape[-1]
    bk = block(k_dim)
    bv = _value_block(batch * heads, block(v_dim))
    dhs = torch.empty_like(hs)
    ds0 = torch.empty(batch, heads, k_dim, v_dim, device=q.device, dtype=torch.float32) if has_init else None
    _gated_delta_rule_bwd_state_kernel[(batch * heads, triton.cdiv(v_dim, bv))](
        q=q, k=k, g=g, w=w, do=do, dst=hs if d_final is None else d_final, dhs=dhs, ds0=hs if ds0 is None else ds0,
        scale=scale, T=length, NC=triton.cdiv(length, bt), H=heads, K=k_dim, V=v_dim, BT=bt, BK=bk, BV=bv,
        HAS_DFINAL=d_final is not None, HAS_INIT=has_init, PRECISION=precision,
        num_warps=_num_warps(bk, bv), num_stages=2,
    )  # fmt: skip
    return dhs, ds0


def _chunk_grads(
    *, q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, tm: Tensor, hs: Tensor, dhs: Tensor, do: Tensor,
    scale: float, bt: int, precision: str,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
    """Stage 2 of the backward, every chunk at once: ``dq, dk, dv, dg, dbeta`` from each chunk's start state and
    end-state gradient."""
    batch, length, heads, k_dim = q.shape
    v_dim = v.shape[-1]
    bk, bv = block(k_dim), block(v_dim)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    dg, dbeta = torch.empty_like(g), torch.empty_like(beta)
    n_chunks = triton.cdiv(length, bt)
    _gated_delta_rule_bwd_local_kernel[(n_chunks, batch * heads)](
        q=q, k=k, v=v, g=g, beta=beta, tm=tm, hs=hs, dhs=dhs, do=do, dq=dq, dk=dk, dv=dv, dg=dg, dbeta=dbeta,
        scale=scale, T=length, NC=n_chunks, H=heads, K=k_dim, V=v_dim, BT=bt, BK=bk, BV=bv, PRECISION=precision,
        num_warps=_num_warps(bk, bv), num_stages=1,
    )  # fmt: skip
    return dq, dk, dv, dg, dbeta


def gated_delta_rule_chunk_fwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    *,
    scale: float,
    initial_state: Tensor | None,
    output_final_state: bool,
    chunk_size: int,
    store_for_backward: bool,
) -> tuple[Tensor, Tensor | None, GatedDeltaRuleSaved | None]:
    """Forward: ``o``, the final state (if asked) and what the backward needs (if ``store_for_backward``).

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, H, V]``; g, beta: ``[B, T, H]`` (contiguous).
        scale: multiplies ``q``.
        initial_state: float32 ``S [B, H, K, V]`` (contiguous) or ``None`` (zeros).
        output_final_state: write the state after the last token.
        chunk_size: requested tokens per chunk (see :func:`_chunk`).
        store_for_backward: keep ``T``, ``W`` and the chunk-start states.

    Returns:
        ``o [B, T, H, V]`` (dtype of ``v``), the float32 final state or ``None``, and ``(T, W, states)`` or ``None``.
    """
    bt = _chunk(q.shape[1], chunk_size, block(q.shape[-1]), block(v.shape[-1]))
    precision = dot_precision(v.dtype)
    w, u, tm = _prepare(k=k, v=v, g=g, beta=beta, bt=bt, precision=precision, store_t=store_for_backward)
    o, final, hs = _state_pass(
        q=q, k=k, g=g, w=w, u=u, initial_state=initial_state, scale=scale, bt=bt, precision=precision,
        output_final_state=output_final_state, store_chunks=store_for_backward, out_dtype=v.dtype,
    )  # fmt: skip
    return o, final, ((tm, w, hs) if store_for_backward else None)


def gated_delta_rule_chunk_bwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    saved: GatedDeltaRuleSaved,
    do: Tensor,
    d_final: Tensor | None,
    *,
    scale: float,
    chunk_size: int,
    has_init: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor | None]:
    """Backward: gradients of ``q, k, v, g, beta`` and of the initial state (``None`` without one).

    Args:
        q, k, v, g, beta: the forward inputs (contiguous).
        saved: ``(T, W, states)`` from :func:`gated_delta_rule_chunk_fwd` with ``store_for_backward=True``.
        do: ``[B, T, H, V]`` gradient of the output.
        d_final: gradient of the final state, or ``None`` (zeros).
        scale: multiplies ``q``.
        chunk_size: the forward's requested chunk size.
        has_init: whether the forward had an initial state (then its float32 gradient is returned).
    """
    bt = _chunk(q.shape[1], chunk_size, block(q.shape[-1]), block(v.shape[-1]))
    precision = dot_precision(v.dtype)
    tm, w, hs = saved
    do = do.contiguous()
    d_final = None if d_final is None else d_final.float().contiguous()
    dhs, ds0 = _state_grad_pass(
        q=q, k=k, g=g, w=w, do=do, hs=hs, d_final=d_final, scale=scale, bt=bt, precision=precision,
        has_init=has_init,
    )  # fmt: skip
    dq, dk, dv, dg, dbeta = _chunk_grads(
        q=q, k=k, v=v, g=g, beta=beta, tm=tm, hs=hs, dhs=dhs, do=do, scale=scale, bt=bt, precision=precision
    )
    return dq, dk, dv, dg, dbeta, ds0


class GatedDeltaRuleChunkFunction(torch.autograd.Function):
    """Autograd wrapper: :func:`gated_delta_rule_chunk_fwd` forward, :func:`gated_delta_rule_chunk_bwd` backward."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta, s0, scale, chunk_size, output_final_state):
        q, k, v, g, beta = contiguous(q, k, v, g, beta)
        has_init = s0 is not None
        o, final, saved = gated_delta_rule_chunk_fwd(
            q,
            k,
            v,
            g,
            beta,
            scale=scale,
            initial_state=s0.float().contiguous() if has_init else None,
            output_final_state=output_final_state,
            chunk_size=chunk_size,
            store_for_backward=any(ctx.needs_input_grad[:6]),
        )
        if saved is not None:
            ctx.save_for_backward(q, k, v, g, beta, *saved)
        ctx.scale, ctx.chunk_size, ctx.has_init = scale, chunk_size, has_init
        ctx.s0_dtype = s0.dtype if has_init else None
        return o, final

    @staticmethod
    def backward(ctx, do, d_final):
        q, k, v, g, beta, *saved = ctx.saved_tensors
        dq, dk, dv, dg, dbeta, ds0 = gated_delta_rule_chunk_bwd(
            q, k, v, g, beta, tuple(saved), do, d_final, scale=ctx.scale, chunk_size=ctx.chunk_size,
            has_init=ctx.has_init,
        )  # fmt: skip
        if ds0 is not None:
            ds0 = ds0.to(ctx.s0_dtype)
        return dq, dk, dv, dg, dbeta, ds0, None, None, None


def gated_delta_rule_chunk(
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
    """The gated delta rule over a sequence with the chunkwise Triton kernels (same meaning as
    :func:`tsfm.kernels.ops.gated_delta_rule`).

    Args:
        q: ``[B, T, H, K]`` queries (multiplied by ``scale``).
        k: ``[B, T, H, K]`` keys, expected L2-normalised by the caller (not normalised here).
        v: ``[B, T, H, V]`` values (bf16, fp16 or fp32).
        g: ``[B, T, H]`` log-decays ``<= 0``.
        beta: ``[B, T, H]`` write strengths (``(0, 1)``, or ``(0, 2)`` for the negative-eigenvalue variant).
        scale: multiplies ``q``; defaults to ``K ** -0.5``.
        initial_state: ``S [B, H, K, V]`` to continue from (used in float32; its gradient has its dtype), or
            ``None`` for zeros.
        output_final_state: also return the float32 state after the last token.
        chunk_size: tokens per chunk (rounded to a power of two in ``[16, 64]``, 32 at most when ``K`` or ``V`` is
            128 wide; the result does not depend on it).

    Returns:
        ``o [B, T, H, V]`` in the dtype of ``v`` and the final float32 state ``[B, H, K, V]`` or ``None``.

    Example:
        >>> q = torch.randn(2, 100, 4, 64, device="cuda"); v = torch.randn(2, 100, 4, 64, device="cuda")
        >>> k = F.normalize(torch.randn(2, 100, 4, 64, device="cuda"), dim=-1)
        >>> g = F.logsigmoid(torch.randn(2, 100, 4, device="cuda")); beta = torch.rand(2, 100, 4, device="cuda")
        >>> o, state = gated_delta_rule_chunk(q, k, v, g, beta, output_final_state=True)
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    o, final = GatedDeltaRuleChunkFunction.apply(q, k, v, g, beta, initial_state, scale, chunk_size, output_final_state)
    return o, (final if output_final_state else None)
