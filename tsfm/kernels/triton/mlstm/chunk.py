"""mLSTM chunkwise Triton kernels: forward, backward and the autograd function that calls them as named stages.

The math is that of :func:`tsfm.kernels.reference.mlstm.mlstm_chunkwise` (the executable spec): inside a chunk of ``L``
tokens, with ``b`` the cumulative sum of ``logsig(f̃)`` from the chunk start and ``m_0`` the carried stabiliser::

    m_t = b_t + max(m_0, max_{s<=t} (ĩ_s - b_s))                    # exactly the recurrent stabiliser
    h_t = (sum_s w_ts (q_t.k_s) v_s + d_t q_t C_0) / (max(|den_t|, exp(-m_t)) + 1e-6)
    w_ts = exp(ĩ_s - b_s + b_t - m_t),  d_t = exp(b_t + m_0 - m_t)

The stabiliser carries no gradient; every other path, the normaliser ``n`` and the ``max(|.|, .)`` included, has its
exact gradient (mlstm_kernels treats the normaliser as a constant in its backward; we do not).

Two ways to run it, same math (the chunk body is shared through ``@triton.jit`` helpers), chosen by
:func:`_use_split`:

Sequential path, one program per ``(batch, head)`` (the forward also splits the value width), best when there are
many ``(batch, head)`` pairs or a single chunk:

* ``_mlstm_chunk_fwd_kernel``: walks the chunks in order, keeps ``C [K, V]``, ``n [K]`` and ``m`` on chip, writes
  ``h``, the final state and (for the backward) the state at each chunk start.
* ``_mlstm_chunk_bwd_kernel``: walks the chunks in reverse, keeps ``dC`` and ``dn`` on chip, recomputes each
  chunk's forward from its stored start state and writes ``dq, dk, dv, dĩ, df̃`` and the initial state's gradient.

Split path (the FLA / mlstm_kernels ``limit_chunk`` structure), for long sequences over few ``(batch, head)`` pairs,
where the sequential path leaves most of the GPU idle while one program walks hundreds of chunks. Only a light
recurrence stays sequential; the ``O(L^2)`` work runs with one program per chunk:

* ``_mlstm_chunk_states_kernel``, grid ``(B*H, K-tiles, V-tiles)``: the state recurrence alone (``k, v, ĩ, f̃``,
  no ``q``, no output), writing the state at each chunk start and the final state.
* ``_mlstm_chunk_out_kernel``, grid ``(B*H, chunks, V-blocks)``: ``h`` of one chunk from its start state.
* ``_mlstm_chunk_dstate_local_kernel``, grid ``(B*H, chunks)``: each chunk's own contribution to the gradient of
  its start state, ``dC_start = d_end dC_end + (q d)^T dnum`` and ``dn_start = d_end dn_end + (q d)^T dden``: the
  term ``(q d)^T dnum`` needs only that chunk's read-out (``dden`` sums over the whole value width, so it is done
  here, unsplit), and ``d_end``.
* ``_mlstm_chunk_dstate_scan_kernel``, grid ``(B*H, K-tiles, V-tiles)``: the reverse recurrence
  ``dC <- d_end dC + increment``, now elementwise on ``[K, V]`` tiles, so it splits over both widths exactly; it
  overwrites each increment with the gradient flowing into that chunk's end and writes the initial state's gradient.
* ``_mlstm_chunk_bwd_local_kernel``, grid ``(B*H, chunks)``: ``dq, dk, dv, dĩ, df̃`` of one chunk from its start
  state and its end-state gradient, the sequential backward's loop body.

Extra memory of the split path (float32): the chunk-start states ``cs [B, H, NC, K, V]`` (with ``ns, ms``) are
stored by both paths when a gradient is needed; the split forward also needs them without a gradient (as scratch
between its two kernels), and the split backward holds the per-chunk state gradients ``[B, H, NC, K, V]`` (with
``[B, H, NC, K]`` and ``[B, H, NC]``), the same size again, while it runs. That is ``4 K V / L`` bytes per
(token, head), e.g. 256 B at ``K = V = 64, L = 64`` (134 MB at ``B, T, H = 8, 8192, 8``) and 2 KB at
``K = V = 128, L = 32`` (537 MB at ``B, T, H = 128, 512, 4``), against 384 B or 768 B of bf16 ``q, k, v``.

Ragged tails are masked, never padded in memory: a token past ``T`` reads ``ĩ = -1e30`` (weight 0) and
``logsig(f̃) = 0`` (no decay), so the state at the chunk's last row is the state after the last real token.

Matrix products (:func:`_dot`) take float32 operands (``ieee`` for float32 inputs, tf32 otherwise) or, with the
``DOT_BF16`` constexpr (bf16 inputs unless ``TSFM_MLSTM_BF16_DOTS=0``, see :func:`_dot_bf16`), bf16 operands with
float32 accumulation; ``q`` then enters unscaled and ``scale`` multiplies its products (:func:`_scale_q`).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch import Tensor

from tsfm.kernels.triton._common import block, chunk_block, contiguous
from tsfm.kernels.triton._common import dot as _dot
from tsfm.kernels.triton._common import scale_q as _scale_q

EPS = tl.constexpr(1e-6)
"""Added to the read-out's denominator, as in the reference (a constexpr so that kernels may read it)."""

MLSTMState = tuple[Tensor, Tensor, Tensor]

SPLIT_MAX_HEADS = 132
"""The split path is used below this many ``(batch, head)`` pairs (the H200's SM count; see :func:`_use_split`)."""

SPLIT_BY_DEFAULT = os.environ.get("TSFM_MLSTM_SPLIT", "1") != "0"
"""Whether ``split=None`` may pick the split path; ``TSFM_MLSTM_SPLIT=0`` keeps every shape on the sequential
kernels (``split=True`` / ``False`` force either)."""

DOT_BF16_BY_DEFAULT = os.environ.get("TSFM_MLSTM_BF16_DOTS", "1") != "0"
"""Whether bf16 inputs feed bf16 operands to ``tl.dot`` (float32 accumulation) instead of float32 operands at tf32
(see :func:`_dot_bf16`); ``TSFM_MLSTM_BF16_DOTS=0`` turns it off. Checked on the H200 (Triton 3.6): outputs, states
and every gradient within 3.4e-3 of the float64 reference (bf16 limit 1e-2); fwd / fwd+bwd ms, tf32 -> bf16
operands: (1024, 64, 4, 64) 0.179 / 0.943 -> 0.116 / 0.448, (256, 256, 8, 64) 0.397 / 3.27 -> 0.294 / 1.43,
(128, 512, 4, 128) 0.860 / 3.48 -> 0.632 / 2.10, (8, 8192, 8, 64) 0.785 / 3.99 -> 0.693 / 3.03. Float32 and fp16
inputs never use it."""


@triton.jit
def _logsigmoid(x):
    return tl.minimum(x, 0.0) - tl.log(1.0 + tl.exp(-tl.abs(x)))


@triton.jit
def _last(x, o_t, BT: tl.constexpr):
    """The element of a ``[BT]`` vector at row ``BT - 1`` (a scalar)."""
    return tl.sum(tl.where(o_t == BT - 1, x, 0.0), axis=0)


@triton.jit
def _rows(i_b, i_h, i_c, T, o_t, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr):
    """Offsets of chunk ``i_c``'s rows in ``[B, T, H, K]``, ``[B, T, H, V]`` and ``[B, T, H]`` tensors, and the mask
    of the rows that exist (the last chunk may be ragged)."""
    t = i_c * BT + o_t
    row = (i_b * T + t) * H + i_h
    return t < T, row * K, row * V, row


@triton.jit
def _gates(ig, fg, gate, mask_t):
    """``f̃``, ``b`` (cumulative ``logsig(f̃)`` from the chunk start) and ``g = ĩ - b`` of one chunk."""
    b_i = tl.load(ig + gate, mask=mask_t, other=-1e30).to(tl.float32)
    b_f = tl.load(fg + gate, mask=mask_t, other=0.0).to(tl.float32)
    b_b = tl.cumsum(tl.where(mask_t, _logsigmoid(b_f), 0.0), axis=0)
    return b_f, b_b, b_i - b_b


@triton.jit
def _stabiliser(b_b, b_g, m0, causal):
    """``m_t = b_t + max(m_0, max_{s<=t} g_s)`` for every row of the chunk."""
    return b_b + tl.maximum(m0, tl.max(tl.where(causal, b_g[None, :], float("-inf")), axis=1))


@triton.jit
def _chunk_end(b_b, b_g, m0, o_t, BT: tl.constexpr):
    """At the chunk's last row: the stabiliser ``m_end``, the start state's decay ``d_end`` and each token's weight
    ``exp(g_s + b_end - m_end)`` in the end state. The last row's causal max is the max over the whole chunk, so this
    needs no ``[L, L]`` tile (the states kernel uses it alone)."""
    b_end = _last(b_b, o_t, BT)
    m_end = b_end + tl.maximum(m0, tl.max(b_g, axis=0))
    return m_end, tl.exp(b_end + m0 - m_end), tl.exp(b_g + b_end - m_end)


@triton.jit
def _state_update(
    C, n, m, b_k, b_v, b_b, b_g, o_t, BT: tl.constexpr, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr
):  # fmt: skip
    """The state at the chunk end from the state at its start: ``C_end = d_end C_0 + sum_s w_s k_s v_s^T``."""
    m_end, d_end, b_wend = _chunk_end(b_b, b_g, m, o_t, BT)
    b_kw = b_k * b_wend[:, None]
    C = d_end * C + _dot(tl.trans(b_kw), b_v, PRECISION, DOT_BF16)
    return C, d_end * n + tl.sum(b_kw, axis=0), m_end


@triton.jit
def _readout(
    b_q, q_scale, b_k, b_v, b_b, b_g, b_m, C0, n0, m0, causal, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr
):  # fmt: skip
    """A chunk's read-out from its start state: ``h = num / denom`` with ``num = P v + d q C_0``,
    ``den = P 1 + d q.n_0``, ``denom = max(|den|, exp(-m)) + eps`` and ``P = w * (q k^T)``; the intermediate values are
    returned for the backward (the forward's compiler drops those it does not use)."""
    b_w = tl.exp(tl.where(causal, b_g[None, :] + (b_b - b_m)[:, None], float("-inf")))
    b_d = tl.exp(b_b + m0 - b_m)
    b_p = _dot(b_q, tl.trans(b_k), PRECISION, DOT_BF16) * q_scale * b_w
    b_qc = _dot(b_q, C0, PRECISION, DOT_BF16) * q_scale
    b_qn = tl.sum(b_q * n0[None, :], axis=1) * q_scale
    b_num = _dot(b_p, b_v, PRECISION, DOT_BF16) + b_d[:, None] * b_qc
    b_den = tl.sum(b_p, axis=1) + b_d * b_qn
    b_floor = tl.exp(-b_m)
    b_denom = tl.maximum(tl.abs(b_den), b_floor) + EPS
    return b_w, b_d, b_p, b_qc, b_qn, b_num, b_den, b_floor, b_denom


@triton.jit
def _readout_grad(b_dh, b_num, b_den, b_floor, b_denom):
    """Gradients of ``num`` and ``den`` from that of ``h = num / (max(|den|, exp(-m)) + eps)``; ``dden`` sums over
    the whole value width."""
    b_dnum = b_dh / b_denom[:, None]
    b_sign = tl.where(b_den > 0, 1.0, tl.where(b_den < 0, -1.0, 0.0))
    b_dden = tl.where(tl.abs(b_den) > b_floor, b_sign, 0.0) * (-tl.sum(b_dnum * b_num, axis=1) / b_denom)
    return b_dnum, b_dden


@triton.jit
def _dstate_increment(b_q, q_scale, b_d, b_dnum, b_dden, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr):
    """A chunk's own contribution to the gradient of its start state: ``(q d)^T dnum`` and ``(q d)^T dden``."""
    b_qd = b_q * b_d[:, None]
    if DOT_BF16:  # keep q an exact bf16 operand: the weight d goes on dnum, rounded to bf16 anyway
        b_dC = _dot(tl.trans(b_q), b_dnum * b_d[:, None], PRECISION, DOT_BF16) * q_scale
    else:
        b_dC = _dot(tl.trans(b_qd), b_dnum, PRECISION, DOT_BF16)
    return b_dC, tl.sum(b_qd * b_dden[:, None], axis=0) * q_scale


@triton.jit
def _chunk_bwd(
    b_q, q_scale, b_k, b_v, b_dh, b_f, b_b, b_g, C0, n0, m0, dC, dn, o_t, causal,
    BT: tl.constexpr, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr,
):  # fmt: skip
    """One chunk's backward from its start state ``(C0, n0, m0)`` and the gradient ``(dC, dn)`` of its end state.

    Returns ``dq`` (of the scaled ``q``), ``dk, dv, dĩ, df̃``, and the start-state gradient's pieces
    ``d, dnum, dden, d_end`` (see :func:`_dstate_increment`).
    """
    # Recompute the chunk's forward from its start state.
    b_m = _stabiliser(b_b, b_g, m0, causal)
    b_w, b_d, b_p, b_qc, b_qn, b_num, b_den, b_floor, b_denom = _readout(
        b_q, q_scale, b_k, b_v, b_b, b_g, b_m, C0, n0, m0, causal, PRECISION, DOT_BF16
    )
    b_dnum, b_dden = _readout_grad(b_dh, b_num, b_den, b_floor, b_denom)

    # Intra-chunk part: P = w * (q k^T), num = P v + d qC0, den = P 1 + d q.n0.
    b_dp = _dot(b_dnum, tl.trans(b_v), PRECISION, DOT_BF16) + b_dden[:, None]
    b_ds = b_dp * b_w
    b_dlogw = b_dp * b_p
    b_dq = _dot(b_ds, b_k, PRECISION, DOT_BF16) + b_d[:, None] * (
        _dot(b_dnum, tl.trans(C0), PRECISION, DOT_BF16) + b_dden[:, None] * n0[None, :]
    )
    b_dk = _dot(tl.trans(b_ds), b_q, PRECISION, DOT_BF16) * q_scale
    b_dv = _dot(tl.trans(b_p), b_dnum, PRECISION, DOT_BF16)
    b_dd = tl.sum(b_dnum * b_qc, axis=1) + b_dden * b_qn

    # Chunk-end state: C_end = d_end C0 + sum_s w_end_s k_s v_s^T (likewise n), fed by dC, dn of the next chunk.
    _, d_end, b_wend = _chunk_end(b_b, b_g, m0, o_t, BT)
    b_x = _dot(b_v, tl.trans(dC), PRECISION, DOT_BF16) + dn[None, :]
    b_dk += b_wend[:, None] * b_x
    b_dv += b_wend[:, None] * _dot(b_k, dC, PRECISION, DOT_BF16)
    b_dlogwend = tl.sum(b_k * b_x, axis=1) * b_wend
    dd_end = tl.sum(tl.sum(C0 * dC, axis=1), axis=0) + tl.sum(n0 * dn, axis=0)

    # Log-weights -> gates: log w_ts = i_s - b_s + b_t - m_t, d_t = exp(b_t + m0 - m_t), b = cumsum(logsig f).
    b_di = tl.sum(b_dlogw, axis=0) + b_dlogwend
    b_db = tl.sum(b_dlogw, axis=1) - tl.sum(b_dlogw, axis=0) + b_dd * b_d - b_dlogwend
    b_db += tl.where(o_t == BT - 1, tl.sum(b_dlogwend, axis=0) + dd_end * d_end, 0.0)
    b_dlogf = tl.sum(b_db, axis=0) - tl.cumsum(b_db, axis=0) + b_db
    b_df = b_dlogf * tl.sigmoid(-b_f)
    return b_dq, b_dk, b_dv, b_di, b_df, b_d, b_dnum, b_dden, d_end


@triton.jit
def _mlstm_chunk_fwd_kernel(
    q, k, v, ig, fg, c0, n0, m0,  # inputs [B, T, H, *], gates [B, T, H], initial state
    h, ct, nt, mt,  # output [B, T, H, V], final state
    cs, ns, ms,  # state at each chunk start [B, H, NC, K, V], [B, H, NC, K], [B, H, NC]
    scale, T, NC,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    HAS_INIT: tl.constexpr, STORE_FINAL: tl.constexpr, STORE_CHUNKS: tl.constexpr,
    PRECISION: tl.constexpr, DOT_BF16: tl.constexpr,
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
        C = tl.load(c0 + i_bh * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0).to(tl.float32)
        n = tl.load(n0 + i_bh * K + o_k, mask=mask_k, other=0.0).to(tl.float32)
    else:
        C = tl.zeros([BK, BV], dtype=tl.float32)
        n = tl.zeros([BK], dtype=tl.float32)
    m = tl.load(m0 + i_bh).to(tl.float32)

    for i_c in range(NC):
        mask_t, row_qk, row_v, gate = _rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
        mask_tk = mask_t[:, None] & mask_k[None, :]
        mask_tv = mask_t[:, None] & mask_v[None, :]
        b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_q, q_scale = _scale_q(b_q, scale, DOT_BF16)
        b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
        _, b_b, b_g = _gates(ig, fg, gate, mask_t)

        b_m = _stabiliser(b_b, b_g, m, causal)
        _, _, _, _, _, b_num, _, _, b_denom = _readout(
            b_q, q_scale, b_k, b_v, b_b, b_g, b_m, C, n, m, causal, PRECISION, DOT_BF16
        )
        tl.store(h + row_v[:, None] + o_v[None, :], (b_num / b_denom[:, None]).to(h.dtype.element_ty), mask=mask_tv)

        if STORE_CHUNKS:
            chunk = i_bh * NC + i_c
            tl.store(cs + chunk * K * V + o_k[:, None] * V + o_v[None, :], C, mask=mask_kv)
            if i_v == 0:
                tl.store(ns + chunk * K + o_k, n, mask=mask_k)
                tl.store(ms + chunk, m)

        C, n, m = _state_update(C, n, m, b_k, b_v, b_b, b_g, o_t, BT, PRECISION, DOT_BF16)

    if STORE_FINAL:
        tl.store(ct + i_bh * K * V + o_k[:, None] * V + o_v[None, :], C, mask=mask_kv)
        if i_v == 0:
            tl.store(nt + i_bh * K + o_k, n, mask=mask_k)
            tl.store(mt + i_bh, m)


@triton.jit
def _mlstm_chunk_bwd_kernel(
    q, k, v, ig, fg, cs, ns, ms, dh, dct, dnt,  # inputs, chunk-start states, output and final-state gradients
    dq, dk, dv, di, df, dc0, dn0,  # gradients of the inputs and of the initial state
    scale, T, NC,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    HAS_INIT: tl.constexpr, HAS_DFINAL: tl.constexpr, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr,
):  # fmt: skip
    i_bh = tl.program_id(0)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    mask_k = o_k < K
    mask_v = o_v < V
    mask_kv = mask_k[:, None] & mask_v[None, :]
    causal = o_t[:, None] >= o_t[None, :]

    if HAS_DFINAL:
        dC = tl.load(dct + i_bh * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0).to(tl.float32)
        dn = tl.load(dnt + i_bh * K + o_k, mask=mask_k, other=0.0).to(tl.float32)
    else:
        dC = tl.zeros([BK, BV], dtype=tl.float32)
        dn = tl.zeros([BK], dtype=tl.float32)

    for j in range(NC):
        i_c = NC - 1 - j
        chunk = i_bh * NC + i_c
        C0 = tl.load(cs + chunk * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0)
        n0 = tl.load(ns + chunk * K + o_k, mask=mask_k, other=0.0)
        m0 = tl.load(ms + chunk)

        mask_t, row_qk, row_v, gate = _rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
        mask_tk = mask_t[:, None] & mask_k[None, :]
        mask_tv = mask_t[:, None] & mask_v[None, :]
        b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_q, q_scale = _scale_q(b_q, scale, DOT_BF16)
        b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
        b_dh = tl.load(dh + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
        b_f, b_b, b_g = _gates(ig, fg, gate, mask_t)

        b_dq, b_dk, b_dv, b_di, b_df, b_d, b_dnum, b_dden, d_end = _chunk_bwd(
            b_q, q_scale, b_k, b_v, b_dh, b_f, b_b, b_g, C0, n0, m0, dC, dn, o_t, causal, BT, PRECISION, DOT_BF16
        )
        tl.store(dq + row_qk[:, None] + o_k[None, :], (b_dq * scale).to(dq.dtype.element_ty), mask=mask_tk)
        tl.store(dk + row_qk[:, None] + o_k[None, :], b_dk.to(dk.dtype.element_ty), mask=mask_tk)
        tl.store(dv + row_v[:, None] + o_v[None, :], b_dv.to(dv.dtype.element_ty), mask=mask_tv)
        tl.store(di + gate, b_di.to(di.dtype.element_ty), mask=mask_t)
        tl.store(df + gate, b_df.to(df.dtype.element_ty), mask=mask_t)

        # Gradient of the chunk-start state, carried to the previous chunk.
        b_dC, b_dn = _dstate_increment(b_q, q_scale, b_d, b_dnum, b_dden, PRECISION, DOT_BF16)
        dC = d_end * dC + b_dC
        dn = d_end * dn + b_dn

    if HAS_INIT:
        tl.store(dc0 + i_bh * K * V + o_k[:, None] * V + o_v[None, :], dC, mask=mask_kv)
        tl.store(dn0 + i_bh * K + o_k, dn, mask=mask_k)


@triton.jit
def _mlstm_chunk_states_kernel(
    k, v, ig, fg, c0, n0, m0,  # keys, values, gates, initial state
    ct, nt, mt, cs, ns, ms,  # final state; state at each chunk start [B, H, NC, K, V], [B, H, NC, K], [B, H, NC]
    T, NC,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    HAS_INIT: tl.constexpr, STORE_FINAL: tl.constexpr, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr,
):  # fmt: skip
    """Split forward, step 1: the state recurrence over the chunks for one ``[BK, BV]`` tile of ``C`` (rows of ``C``
    and ``n`` are independent, so the tile needs only its keys' columns)."""
    i_bh = tl.program_id(0)
    i_k = tl.program_id(1)
    i_v = tl.program_id(2)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    mask_k = o_k < K
    mask_v = o_v < V
    mask_kv = mask_k[:, None] & mask_v[None, :]
    first_v = i_v == 0
    first_kv = (i_k == 0) & first_v

    if HAS_INIT:
        C = tl.load(c0 + i_bh * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0).to(tl.float32)
        n = tl.load(n0 + i_bh * K + o_k, mask=mask_k, other=0.0).to(tl.float32)
    else:
        C = tl.zeros([BK, BV], dtype=tl.float32)
        n = tl.zeros([BK], dtype=tl.float32)
    m = tl.load(m0 + i_bh).to(tl.float32)

    for i_c in range(NC):
        chunk = i_bh * NC + i_c
        tl.store(cs + chunk * K * V + o_k[:, None] * V + o_v[None, :], C, mask=mask_kv)
        tl.store(ns + chunk * K + o_k, n, mask=mask_k & first_v)
        tl.store(ms + chunk, m, mask=first_kv)

        mask_t, row_qk, row_v, gate = _rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
        b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_t[:, None] & mask_k[None, :], other=0.0)
        b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_t[:, None] & mask_v[None, :], other=0.0)
        _, b_b, b_g = _gates(ig, fg, gate, mask_t)
        b_k, b_v = b_k.to(tl.float32), b_v.to(tl.float32)
        C, n, m = _state_update(C, n, m, b_k, b_v, b_b, b_g, o_t, BT, PRECISION, DOT_BF16)

    if STORE_FINAL:
        tl.store(ct + i_bh * K * V + o_k[:, None] * V + o_v[None, :], C, mask=mask_kv)
        tl.store(nt + i_bh * K + o_k, n, mask=mask_k & first_v)
        tl.store(mt + i_bh, m, mask=first_kv)


@triton.jit
def _mlstm_chunk_out_kernel(
    q, k, v, ig, fg, cs, ns, ms, h,  # inputs, chunk-start states, output [B, T, H, V]
    scale, T, NC,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr,
):  # fmt: skip
    """Split forward, step 2: ``h`` of one chunk (one block of its value width) from the chunk's start state."""
    i_bh = tl.program_id(0)
    i_c = tl.program_id(1)
    i_v = tl.program_id(2)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    mask_k = o_k < K
    mask_v = o_v < V
    mask_kv = mask_k[:, None] & mask_v[None, :]
    causal = o_t[:, None] >= o_t[None, :]

    chunk = i_bh * NC + i_c
    C0 = tl.load(cs + chunk * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0)
    n0 = tl.load(ns + chunk * K + o_k, mask=mask_k, other=0.0)
    m0 = tl.load(ms + chunk)

    mask_t, row_qk, row_v, gate = _rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
    mask_tk = mask_t[:, None] & mask_k[None, :]
    mask_tv = mask_t[:, None] & mask_v[None, :]
    b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_q, q_scale = _scale_q(b_q, scale, DOT_BF16)
    b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    _, b_b, b_g = _gates(ig, fg, gate, mask_t)

    b_m = _stabiliser(b_b, b_g, m0, causal)
    _, _, _, _, _, b_num, _, _, b_denom = _readout(
        b_q, q_scale, b_k, b_v, b_b, b_g, b_m, C0, n0, m0, causal, PRECISION, DOT_BF16
    )
    tl.store(h + row_v[:, None] + o_v[None, :], (b_num / b_denom[:, None]).to(h.dtype.element_ty), mask=mask_tv)


@triton.jit
def _mlstm_chunk_dstate_local_kernel(
    q, k, v, ig, fg, cs, ns, ms, dh,  # inputs, chunk-start states, output gradient
    dcs, dns, dds,  # per chunk: (q d)^T dnum [B, H, NC, K, V], (q d)^T dden [B, H, NC, K], d_end [B, H, NC]
    scale, T, NC,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr,
):  # fmt: skip
    """Split backward, step 1: one chunk's own term of its start-state gradient, and the start state's decay."""
    i_bh = tl.program_id(0)
    i_c = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    mask_k = o_k < K
    mask_v = o_v < V
    mask_kv = mask_k[:, None] & mask_v[None, :]
    causal = o_t[:, None] >= o_t[None, :]

    chunk = i_bh * NC + i_c
    C0 = tl.load(cs + chunk * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0)
    n0 = tl.load(ns + chunk * K + o_k, mask=mask_k, other=0.0)
    m0 = tl.load(ms + chunk)

    mask_t, row_qk, row_v, gate = _rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
    mask_tk = mask_t[:, None] & mask_k[None, :]
    mask_tv = mask_t[:, None] & mask_v[None, :]
    b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_q, q_scale = _scale_q(b_q, scale, DOT_BF16)
    b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    b_dh = tl.load(dh + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    _, b_b, b_g = _gates(ig, fg, gate, mask_t)

    b_m = _stabiliser(b_b, b_g, m0, causal)
    _, b_d, _, _, _, b_num, b_den, b_floor, b_denom = _readout(
        b_q, q_scale, b_k, b_v, b_b, b_g, b_m, C0, n0, m0, causal, PRECISION, DOT_BF16
    )
    b_dnum, b_dden = _readout_grad(b_dh, b_num, b_den, b_floor, b_denom)
    b_dC, b_dn = _dstate_increment(b_q, q_scale, b_d, b_dnum, b_dden, PRECISION, DOT_BF16)
    _, d_end, _ = _chunk_end(b_b, b_g, m0, o_t, BT)
    tl.store(dcs + chunk * K * V + o_k[:, None] * V + o_v[None, :], b_dC, mask=mask_kv)
    tl.store(dns + chunk * K + o_k, b_dn, mask=mask_k)
    tl.store(dds + chunk, d_end)


@triton.jit
def _mlstm_chunk_dstate_scan_kernel(
    dcs, dns, dds, dct, dnt,  # per-chunk increments (overwritten with the chunk-end gradients), final-state gradients
    dc0, dn0,  # gradient of the initial state
    NC,
    K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    HAS_INIT: tl.constexpr, HAS_DFINAL: tl.constexpr,
):  # fmt: skip
    """Split backward, step 2: ``dC_start = d_end dC_end + increment`` over the chunks in reverse, one ``[BK, BV]``
    tile of ``dC`` per program. Each chunk's increment is replaced in place by the gradient of that chunk's end state.
    Only the first value tile reads and writes ``dn`` (others read zeros), so no program reads a ``dn`` entry that
    another has already overwritten."""
    i_bh = tl.program_id(0)
    i_k = tl.program_id(1)
    i_v = tl.program_id(2)
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    mask_k = o_k < K
    mask_v = o_v < V
    mask_kv = mask_k[:, None] & mask_v[None, :]
    mask_n = mask_k & (i_v == 0)

    if HAS_DFINAL:
        dC = tl.load(dct + i_bh * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0).to(tl.float32)
        dn = tl.load(dnt + i_bh * K + o_k, mask=mask_n, other=0.0).to(tl.float32)
    else:
        dC = tl.zeros([BK, BV], dtype=tl.float32)
        dn = tl.zeros([BK], dtype=tl.float32)

    for j in range(NC):
        chunk = i_bh * NC + NC - 1 - j
        p_c = dcs + chunk * K * V + o_k[:, None] * V + o_v[None, :]
        p_n = dns + chunk * K + o_k
        b_dC = tl.load(p_c, mask=mask_kv, other=0.0)
        b_dn = tl.load(p_n, mask=mask_n, other=0.0)
        d_end = tl.load(dds + chunk)
        tl.store(p_c, dC, mask=mask_kv)
        tl.store(p_n, dn, mask=mask_n)
        dC = d_end * dC + b_dC
        dn = d_end * dn + b_dn

    if HAS_INIT:
        tl.store(dc0 + i_bh * K * V + o_k[:, None] * V + o_v[None, :], dC, mask=mask_kv)
        tl.store(dn0 + i_bh * K + o_k, dn, mask=mask_n)


@triton.jit
def _mlstm_chunk_bwd_local_kernel(
    q, k, v, ig, fg, cs, ns, ms, dh, dcs, dns,  # inputs, chunk-start states, output and chunk-end state gradients
    dq, dk, dv, di, df,  # gradients of the inputs
    scale, T, NC,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr,
):  # fmt: skip
    """Split backward, step 3: ``dq, dk, dv, dĩ, df̃`` of one chunk (the sequential backward's loop body)."""
    i_bh = tl.program_id(0)
    i_c = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    mask_k = o_k < K
    mask_v = o_v < V
    mask_kv = mask_k[:, None] & mask_v[None, :]
    causal = o_t[:, None] >= o_t[None, :]

    chunk = i_bh * NC + i_c
    C0 = tl.load(cs + chunk * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0)
    n0 = tl.load(ns + chunk * K + o_k, mask=mask_k, other=0.0)
    m0 = tl.load(ms + chunk)
    dC = tl.load(dcs + chunk * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0)
    dn = tl.load(dns + chunk * K + o_k, mask=mask_k, other=0.0)

    mask_t, row_qk, row_v, gate = _rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
    mask_tk = mask_t[:, None] & mask_k[None, :]
    mask_tv = mask_t[:, None] & mask_v[None, :]
    b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_q, q_scale = _scale_q(b_q, scale, DOT_BF16)
    b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    b_dh = tl.load(dh + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    b_f, b_b, b_g = _gates(ig, fg, gate, mask_t)

    b_dq, b_dk, b_dv, b_di, b_df, _, _, _, _ = _chunk_bwd(
        b_q, q_scale, b_k, b_v, b_dh, b_f, b_b, b_g, C0, n0, m0, dC, dn, o_t, causal, BT, PRECISION, DOT_BF16
    )
    tl.store(dq + row_qk[:, None] + o_k[None, :], (b_dq * scale).to(dq.dtype.element_ty), mask=mask_tk)
    tl.store(dk + row_qk[:, None] + o_k[None, :], b_dk.to(dk.dtype.element_ty), mask=mask_tk)
    tl.store(dv + row_v[:, None] + o_v[None, :], b_dv.to(dv.dtype.element_ty), mask=mask_tv)
    tl.store(di + gate, b_di.to(di.dtype.element_ty), mask=mask_t)
    tl.store(df + gate, b_df.to(df.dtype.element_ty), mask=mask_t)


def _num_warps(bk: int, bv: int) -> int:
    return 8 if bk * bv >= 128 * 128 else 4


def _num_warps_per_chunk(bk: int, bv: int) -> int:
    """Warps of the split path's per-chunk kernels: 8 from 64 x 64 tiles on. Compiled for sm_90 (tf32, L = 64), the
    outputs kernel spills 64 B a thread at 4 warps and none at 8, the local-gradients kernel 1.9 KB against 1.3 KB
    (the sequential backward spills 3 KB); 16 warps spill more again. The sequential kernels keep their 4."""
    return 8 if bk * bv >= 64 * 64 else 4


def _precision(dtype: torch.dtype) -> str:
    """``tl.dot`` precision of float32 operands: full float32 products for float32 inputs, tf32 for bf16/fp16 inputs
    (their mantissa is shorter than tf32's). Unused where :func:`_dot_bf16` gives bf16 operands.

    bf16 operands were first tried on the H200 with Triton 3.6 and failed the check (forward off by 0.46 relative,
    then an illegal memory access), at a time when the interpreter multiplied bf16 operands as raw bits (now patched
    in :mod:`tsfm.kernels.triton._common`), so the CPU could not look. The CPU has since shown one pitfall, rounding
    ``scale q`` to bf16 (up to 0.3 relative through the normaliser's cancellation when ``scale`` is not a power of
    two; :func:`_scale_q` avoids it). The present code passes the H200 check (see :data:`DOT_BF16_BY_DEFAULT`);
    whether ``scale q`` was the whole of the first failure is not known.
    """
    return "ieee" if dtype == torch.float32 else "tf32"


def _dot_bf16(dtype: torch.dtype, bk: int, bv: int) -> bool:
    """Whether the kernels feed bf16 operands to ``tl.dot`` (float32 accumulation): for bf16 inputs when
    :data:`DOT_BF16_BY_DEFAULT` allows it. Not for fp16 inputs: rounding them to bf16 drops 3 bits of ``q`` and ``k``
    in ``P``, hence in ``den``, and the CPU check came out 0.05-0.12 relative against 3e-4 today (tf32).

    Compiled for sm_90 (``benchmarks/kernel_resources.py``; bf16 inputs, L = 64, K = V = 64) bf16 operands cut
    shared memory from 156 KB to 41 KB and spill stores from 4.1 to 2.8 KB a thread in the sequential backward, and
    from 172 KB to 41 KB, 1.5 to 0.6 KB in the split local-gradient kernel; on the H200 the forward + backward runs
    1.3-2.3x faster.

    What each product loses: ``q, k, v, dh`` are bf16 inputs, exact as operands. ``q`` is therefore not pre-scaled
    (:func:`_scale_q`): ``scale q`` rounded to bf16 shifts the normaliser ``den``, which can cancel, and the error
    came out 0.2-0.3 relative (K = 8, 128) on the CPU. Rounded to 8 bits of mantissa: the gate-weighted scores ``P``
    and their gradient ``ds``, ``k w`` in the state update, ``dnum`` (and ``d dnum``), and the carried ``C_0`` and
    ``dC`` (in ``q C_0``, ``dnum C_0^T``, ``v dC^T``, ``k dC``). The sums stay float32 (accumulators, the carried
    state, ``den = P 1 + d q.n_0`` from the unrounded ``P``), so nothing compounds over chunks. Keeping the four
    ``C_0`` / ``dC`` products on float32 operands changed no error beyond noise on the CPU with the GPU's
    round-to-nearest emulated, so every product is bf16; the errors are then about those of the bf16 output and
    gradients themselves (see ``tests/kernels/test_triton_mlstm.py``).

    Only for state tiles at least 64 wide (``bk, bv``): the H200 checked 64- and 128-wide heads; narrower ones keep
    the float32-operand kernels that it checked before.
    """
    return DOT_BF16_BY_DEFAULT and dtype == torch.bfloat16 and min(bk, bv) >= 64


def _chunk(length: int, chunk_size: int, bk: int, bv: int) -> int:
    """Tokens per chunk; at most 32 when a state tile is 128 wide, so that the backward fits in shared memory
    (sm_90, float32 operands, K = V = 128: about 400 KB at 64 tokens against a 227 KB limit, 128 KB at 32).

    bf16 operands (:func:`_dot_bf16`) would fit 64 tokens (ptxas, sm_90, K = V = 128, bf16 inputs: 96 KB shared for
    both backward kernels), but registers do not: against 32 tokens, spill stores per thread grow from 1.7 KB to
    4.8 KB (sequential backward), 1.7 KB to 4.0 KB (split local gradients) and 0.4 KB to 2.7 KB (sequential forward).
    So the cap stays until 64 is timed on the H200."""
    bt = chunk_block(length, chunk_size)
    return min(bt, 32) if max(bk, bv) >= 128 else bt


def _use_split(batch_heads: int, n_chunks: int) -> bool:
    """Whether to run the split path (parallel over chunks) rather than the sequential one.

    The sequential kernels run ``batch * heads`` programs (times a value split in the forward), each walking all
    ``n_chunks`` chunks with the whole ``O(L^2)`` chunk body on its critical path; with fewer pairs than SMs most of
    the GPU idles. The split path pays for its parallelism with a round trip of the per-chunk states (and, in the
    backward, their gradients) through memory. Measured on the H200 (bf16, fwd / fwd+bwd ms, sequential -> split):
    (8, 8192, 8, 64), 64 pairs: 0.91 / 5.31 -> 0.78 / 4.00; but (256, 256, 8, 64), 2048 pairs: 0.40 / 3.36 -> 0.56 /
    3.28, (64, 1024, 8, 64), 512 pairs: 0.40 / 3.34 -> 0.59 / 3.63 and (128, 512, 4, 128): 0.86 / 3.49 -> 0.90 /
    6.07. So: split below ``SPLIT_MAX_HEADS`` pairs (the 132 SMs of an H200) with at least two chunks.
    """
    return SPLIT_BY_DEFAULT and n_chunks >= 2 and batch_heads < SPLIT_MAX_HEADS


def _state_tiles(batch_heads: int, bk: int, bv: int) -> tuple[int, int]:
    """``[BK, BV]`` tile of ``C`` per program of the split path's two recurrences (the forward's state pass, the
    backward's state-gradient scan). Their time is the chain over chunks, each link light (one ``[BK, L] x [L, BV]``
    product, or elementwise work), so more, smaller chains finish sooner: halve the wider side, not below 32, until
    about 512 programs run."""
    tk, tv = bk, bv
    while batch_heads * (bk // tk) * (bv // tv) < 512 and max(tk, tv) > 32:
        if tv >= tk:
            tv //= 2
        else:
            tk //= 2
    return tk, tv


def mlstm_chunk_fwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    i: Tensor,
    f: Tensor,
    *,
    scale: float,
    initial_state: MLSTMState | None,
    output_final_state: bool,
    chunk_size: int,
    store_chunks: bool,
    split: bool | None = None,
) -> tuple[Tensor, MLSTMState | None, MLSTMState | None]:
    """Forward stage: ``h``, the final state (if asked) and the chunk-start states (if ``store_chunks``).

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, H, V]``; i, f: ``[B, T, H]`` (contiguous).
        scale: multiplies ``q``.
        initial_state: ``(C [B, H, K, V], n [B, H, K], m [B, H])`` or ``None`` (fresh).
        output_final_state: write the state after the last token.
        chunk_size: requested tokens per chunk (rounded, see :func:`tsfm.kernels.triton._common.chunk_block`).
        store_chunks: keep the state at each chunk start for the backward.
        split: run the split path (states pass, then all chunks' outputs in parallel); ``None`` decides with
            :func:`_use_split`. Both paths give the same result and the same chunk states.

    Returns:
        ``h [B, T, H, V]`` (dtype of ``v``), the final state or ``None``, and ``(cs, ns, ms)`` or ``None``.
    """
    batch, length, heads, k_dim = q.shape
    v_dim = v.shape[-1]
    bk, bv_full = block(k_dim), block(v_dim)
    bt = _chunk(length, chunk_size, bk, bv_full)
    n_chunks = triton.cdiv(length, bt)
    split = _use_split(batch * heads, n_chunks) if split is None else split
    dev = q.device
    f32 = torch.float32
    h = torch.empty_like(v)
    has_init = initial_state is not None
    if has_init:
        c0, n0, m0 = contiguous(*initial_state)
    else:
        c0 = n0 = None
        m0 = torch.full((batch, heads), float("-inf"), device=dev, dtype=f32)
    final = None
    if output_final_state:
        final = (
            torch.empty(batch, heads, k_dim, v_dim, device=dev, dtype=f32),
            torch.empty(batch, heads, k_dim, device=dev, dtype=f32),
            torch.empty(batch, heads, device=dev, dtype=f32),
        )
    chunks = None
    if store_chunks or split:  # the split path passes them between its kernels even without a backward
        chunks = (
            torch.empty(batch, heads, n_chunks, k_dim, v_dim, device=dev, dtype=f32),
            torch.empty(batch, heads, n_chunks, k_dim, device=dev, dtype=f32),
            torch.empty(batch, heads, n_chunks, device=dev, dtype=f32),
        )
    dummy = m0
    precision, dot_bf16 = _precision(v.dtype), _dot_bf16(v.dtype, bk, bv_full)
    if split:
        bks, bvs = _state_tiles(batch * heads, bk, bv_full)
        _mlstm_chunk_states_kernel[(batch * heads, triton.cdiv(k_dim, bks), triton.cdiv(v_dim, bvs))](
            k, v, i, f, c0 if has_init else dummy, n0 if has_init else dummy, m0,
            *(final or (dummy, dummy, dummy)), *chunks,
            length, n_chunks,
            H=heads, K=k_dim, V=v_dim, BT=bt, BK=bks, BV=bvs,
            HAS_INIT=has_init, STORE_FINAL=output_final_state, PRECISION=precision, DOT_BF16=dot_bf16,
            num_warps=_num_warps(bks, bvs), num_stages=2,
        )  # fmt: skip
        _mlstm_chunk_out_kernel[(batch * heads, n_chunks, triton.cdiv(v_dim, bv_full))](
            q, k, v, i, f, *chunks, h,
            scale, length, n_chunks,
            H=heads, K=k_dim, V=v_dim, BT=bt, BK=bk, BV=bv_full, PRECISION=precision, DOT_BF16=dot_bf16,
            num_warps=_num_warps_per_chunk(bk, bv_full), num_stages=1,
        )  # fmt: skip
        return h, final, chunks if store_chunks else None
    # Split the value width over programs when (batch, head) alone cannot fill the GPU. That split forward keeps
    # float32 operands: with bf16 ones it ended in an illegal memory access on the H200 (Triton 3.6) at (2, 300, 4,
    # 64) and (8, 8192, 8, 64) (64-token chunks, 32-wide value blocks), where the unsplit kernel passes the check.
    bv = bv_full if batch * heads >= 512 or bv_full <= 32 else max(32, bv_full // 2)
    dot_bf16 = dot_bf16 and bv == bv_full
    grid = (batch * heads, triton.cdiv(v_dim, bv))
    _mlstm_chunk_fwd_kernel[grid](
        q, k, v, i, f,
        c0 if has_init else dummy, n0 if has_init else dummy, m0,
        h, *(final or (dummy, dummy, dummy)), *(chunks or (dummy, dummy, dummy)),
        scale, length, n_chunks,
        H=heads, K=k_dim, V=v_dim, BT=bt, BK=bk, BV=bv,
        HAS_INIT=has_init, STORE_FINAL=output_final_state, STORE_CHUNKS=store_chunks,
        PRECISION=precision, DOT_BF16=dot_bf16, num_warps=_num_warps(bk, bv), num_stages=2,
    )  # fmt: skip
    return h, final, chunks


def mlstm_chunk_bwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    i: Tensor,
    f: Tensor,
    chunks: MLSTMState,
    dh: Tensor,
    d_final: tuple[Tensor | None, Tensor | None],
    *,
    scale: float,
    chunk_size: int,
    has_init: bool,
    split: bool | None = None,
) -> tuple[Tensor, ...]:
    """Backward stage: gradients of ``q, k, v, i, f`` and of the initial ``(C, n)`` (``None`` without one).

    Args:
        q, k, v, i, f: the forward inputs (contiguous).
        chunks: ``(cs, ns, ms)`` from :func:`mlstm_chunk_fwd` with ``store_chunks=True`` (either path).
        dh: ``[B, T, H, V]`` gradient of the output.
        d_final: gradients of the final ``(C, n)``; ``None`` entries are zeros.
        scale: multiplies ``q``.
        chunk_size: the forward's requested chunk size.
        has_init: whether the forward had an initial state (then its gradient is returned).
        split: run the split path (local state-gradient terms, a light reverse scan, then all chunks' gradients in
            parallel); ``None`` decides with :func:`_use_split`. It needs ``[B, H, NC, K, V]`` float32 more memory.
    """
    batch, length, heads, k_dim = q.shape
    v_dim = v.shape[-1]
    bk, bv = block(k_dim), block(v_dim)
    bt = _chunk(length, chunk_size, bk, bv)
    n_chunks = triton.cdiv(length, bt)
    split = _use_split(batch * heads, n_chunks) if split is None else split
    dev = q.device
    f32 = torch.float32
    dh = dh.contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    di, df = torch.empty_like(i), torch.empty_like(f)
    dct, dnt = d_final
    has_dfinal = dct is not None or dnt is not None
    if has_dfinal:
        zeros_c = torch.zeros(batch, heads, k_dim, v_dim, device=dev, dtype=f32)
        dct = zeros_c if dct is None else dct.float().contiguous()
        dnt = torch.zeros(batch, heads, k_dim, device=dev, dtype=f32) if dnt is None else dnt.float().contiguous()
    dc0 = dn0 = None
    if has_init:
        dc0 = torch.empty(batch, heads, k_dim, v_dim, device=dev, dtype=f32)
        dn0 = torch.empty(batch, heads, k_dim, device=dev, dtype=f32)
    dummy = chunks[2]
    shape = {"H": heads, "K": k_dim, "V": v_dim, "BT": bt, "BK": bk, "BV": bv}
    shape.update(PRECISION=_precision(v.dtype), DOT_BF16=_dot_bf16(v.dtype, bk, bv))
    if split:
        # Per chunk: first its own term of the start-state gradient, then (after the scan) its end-state gradient.
        dcs = torch.empty(batch, heads, n_chunks, k_dim, v_dim, device=dev, dtype=f32)
        dns = torch.empty(batch, heads, n_chunks, k_dim, device=dev, dtype=f32)
        dds = torch.empty(batch, heads, n_chunks, device=dev, dtype=f32)
        _mlstm_chunk_dstate_local_kernel[(batch * heads, n_chunks)](
            q, k, v, i, f, *chunks, dh, dcs, dns, dds, scale, length, n_chunks,
            **shape, num_warps=_num_warps_per_chunk(bk, bv), num_stages=1,
        )  # fmt: skip
        bks, bvs = _state_tiles(batch * heads, bk, bv)
        _mlstm_chunk_dstate_scan_kernel[(batch * heads, triton.cdiv(k_dim, bks), triton.cdiv(v_dim, bvs))](
            dcs, dns, dds, dct if has_dfinal else dummy, dnt if has_dfinal else dummy,
            dc0 if has_init else dummy, dn0 if has_init else dummy, n_chunks,
            K=k_dim, V=v_dim, BK=bks, BV=bvs, HAS_INIT=has_init, HAS_DFINAL=has_dfinal,
            num_warps=4, num_stages=2,
        )  # fmt: skip
        _mlstm_chunk_bwd_local_kernel[(batch * heads, n_chunks)](
            q, k, v, i, f, *chunks, dh, dcs, dns, dq, dk, dv, di, df, scale, length, n_chunks,
            **shape, num_warps=_num_warps_per_chunk(bk, bv), num_stages=1,
        )  # fmt: skip
        return dq, dk, dv, di, df, dc0, dn0
    _mlstm_chunk_bwd_kernel[(batch * heads,)](
        q, k, v, i, f, *chunks, dh,
        dct if has_dfinal else dummy, dnt if has_dfinal else dummy,
        dq, dk, dv, di, df, dc0 if has_init else dummy, dn0 if has_init else dummy,
        scale, length, n_chunks,
        **shape, HAS_INIT=has_init, HAS_DFINAL=has_dfinal,
        num_warps=_num_warps(bk, bv), num_stages=1,
    )  # fmt: skip
    return dq, dk, dv, di, df, dc0, dn0


class MLSTMChunkFunction(torch.autograd.Function):
    """Autograd wrapper: :func:`mlstm_chunk_fwd` forward, :func:`mlstm_chunk_bwd` backward."""

    @staticmethod
    def forward(ctx, q, k, v, i, f, c0, n0, m0, scale, chunk_size, output_final_state, split=None):
        q, k, v, i, f = contiguous(q, k, v, i, f)
        has_init = c0 is not None
        initial_state = (c0.float(), n0.float(), m0.float()) if has_init else None
        h, final, chunks = mlstm_chunk_fwd(
            q,
            k,
            v,
            i,
            f,
            scale=scale,
            initial_state=initial_state,
            output_final_state=output_final_state,
            chunk_size=chunk_size,
            store_chunks=ctx.needs_input_grad[:7].count(True) > 0,
            split=split,
        )
        if chunks is not None:
            ctx.save_for_backward(q, k, v, i, f, *chunks)
        ctx.scale, ctx.chunk_size, ctx.has_init, ctx.split = scale, chunk_size, has_init, split
        ctx.c0_dtype = c0.dtype if has_init else None
        if final is None:
            return h, None, None, None
        ctx.mark_non_differentiable(final[2])
        return h, *final

    @staticmethod
    def backward(ctx, dh, dct, dnt, _dmt):
        q, k, v, i, f, *chunks = ctx.saved_tensors
        dq, dk, dv, di, df, dc0, dn0 = mlstm_chunk_bwd(
            q,
            k,
            v,
            i,
            f,
            tuple(chunks),
            dh,
            (dct, dnt),
            scale=ctx.scale,
            chunk_size=ctx.chunk_size,
            has_init=ctx.has_init,
            split=ctx.split,
        )
        if dc0 is not None:
            dc0, dn0 = dc0.to(ctx.c0_dtype), dn0.to(ctx.c0_dtype)
        return dq, dk, dv, di, df, dc0, dn0, None, None, None, None, None


def mlstm_chunk(
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
    split: bool | None = None,
) -> tuple[Tensor, MLSTMState | None]:
    """The mLSTM over a sequence with the chunkwise Triton kernels (same meaning as :func:`tsfm.kernels.ops.mlstm`).

    Args:
        q: ``[B, T, H, K]`` queries (multiplied by ``scale``).
        k: ``[B, T, H, K]`` keys.
        v: ``[B, T, H, V]`` values (bf16, fp16 or fp32).
        i: ``[B, T, H]`` input-gate pre-activations ``ĩ``.
        f: ``[B, T, H]`` forget-gate pre-activations ``f̃``.
        scale: multiplies ``q``; defaults to ``K ** -0.5``.
        initial_state: ``(C [B, H, K, V], n [B, H, K], m [B, H])`` or ``None`` for the fresh state.
        output_final_state: also return the float32 state after the last token.
        chunk_size: tokens per chunk (rounded to a power of two in ``[16, 128]``; the result does not depend on it).
        split: force the split (parallel over chunks, ``True``) or the sequential (``False``) kernels; ``None``
            picks by shape (:func:`_use_split`). The result is the same either way (to rounding); tests force both.

    Returns:
        ``h [B, T, H, V]`` in the dtype of ``v`` and the final ``(C, n, m)`` or ``None``.

    Example:
        >>> q = k = torch.randn(2, 100, 4, 64, device="cuda"); v = torch.randn(2, 100, 4, 64, device="cuda")
        >>> i = f = torch.randn(2, 100, 4, device="cuda")
        >>> h, (C, n, m) = mlstm_chunk(q, k, v, i, f, output_final_state=True)
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    c0, n0, m0 = initial_state if initial_state is not None else (None, None, None)
    h, ct, nt, mt = MLSTMChunkFunction.apply(q, k, v, i, f, c0, n0, m0, scale, chunk_size, output_final_state, split)
    return h, ((ct, nt, mt) if output_final_state else None)
