"""mLSTM chunkwise Triton kernels: forward, backward and the autograd function that calls them as named stages.

The math is that of :func:`kernels.reference.mlstm.mlstm_chunkwise` (the executable spec): inside a chunk of ``L``
tokens, with ``b`` the cumulative sum of ``logsig(f̃)`` from the chunk start and ``m_0`` the carried stabiliser::

    m_t = b_t + max(m_0, max_{s<=t} (ĩ_s - b_s))                    # exactly the recurrent stabiliser
    h_t = (sum_s w_ts (q_t.k_s) v_s + d_t q_t C_0) / (max(|den_t|, exp(-m_t)) + 1e-6)
    w_ts = exp(ĩ_s - b_s + b_t - m_t),  d_t = exp(b_t + m_0 - m_t)

The stabiliser carries no gradient; every other path, the normaliser ``n`` and the ``max(|.|, .)`` included, has its
exact gradient (mlstm_kernels treats the normaliser as a constant in its backward; we do not).

Kernels (one program per ``(batch, head)``; the forward also splits the value width over programs):

* ``_mlstm_chunk_fwd_kernel``: walks the chunks in order, keeps ``C [K, V]``, ``n [K]`` and ``m`` on chip, writes
  ``h``, the final state and (for the backward) the state at each chunk start.
* ``_mlstm_chunk_bwd_kernel``: walks the chunks in reverse, keeps ``dC`` and ``dn`` on chip, recomputes each
  chunk's forward from its stored start state and writes ``dq, dk, dv, dĩ, df̃`` and the initial state's gradient.

Ragged tails are masked, never padded in memory: a token past ``T`` reads ``ĩ = -1e30`` (weight 0) and
``logsig(f̃) = 0`` (no decay), so the state at the chunk's last row is the state after the last real token.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from kernels.triton._common import block, chunk_block, contiguous

EPS = tl.constexpr(1e-6)
"""Added to the read-out's denominator, as in the reference (a constexpr so that kernels may read it)."""

MLSTMState = tuple[Tensor, Tensor, Tensor]


@triton.jit
def _logsigmoid(x):
    return tl.minimum(x, 0.0) - tl.log(1.0 + tl.exp(-tl.abs(x)))


@triton.jit
def _last(x, o_t, BT: tl.constexpr):
    """The element of a ``[BT]`` vector at row ``BT - 1`` (a scalar)."""
    return tl.sum(tl.where(o_t == BT - 1, x, 0.0), axis=0)


@triton.jit
def _mlstm_chunk_fwd_kernel(
    q, k, v, ig, fg, c0, n0, m0,  # inputs [B, T, H, *], gates [B, T, H], initial state
    h, ct, nt, mt,  # output [B, T, H, V], final state
    cs, ns, ms,  # state at each chunk start [B, H, NC, K, V], [B, H, NC, K], [B, H, NC]
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
        C = tl.load(c0 + i_bh * K * V + o_k[:, None] * V + o_v[None, :], mask=mask_kv, other=0.0).to(tl.float32)
        n = tl.load(n0 + i_bh * K + o_k, mask=mask_k, other=0.0).to(tl.float32)
    else:
        C = tl.zeros([BK, BV], dtype=tl.float32)
        n = tl.zeros([BK], dtype=tl.float32)
    m = tl.load(m0 + i_bh).to(tl.float32)

    for i_c in range(NC):
        t = i_c * BT + o_t
        mask_t = t < T
        row_qk = (i_b * T + t) * H * K + i_h * K
        row_v = (i_b * T + t) * H * V + i_h * V
        mask_tk = mask_t[:, None] & mask_k[None, :]
        mask_tv = mask_t[:, None] & mask_v[None, :]
        b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32) * scale
        b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
        gate = (i_b * T + t) * H + i_h
        b_i = tl.load(ig + gate, mask=mask_t, other=-1e30).to(tl.float32)
        b_f = tl.load(fg + gate, mask=mask_t, other=0.0).to(tl.float32)

        b_b = tl.cumsum(tl.where(mask_t, _logsigmoid(b_f), 0.0), axis=0)
        b_g = b_i - b_b
        b_m = b_b + tl.maximum(m, tl.max(tl.where(causal, b_g[None, :], float("-inf")), axis=1))
        b_w = tl.exp(tl.where(causal, b_g[None, :] + (b_b - b_m)[:, None], float("-inf")))
        b_d = tl.exp(b_b + m - b_m)

        b_p = tl.dot(b_q, tl.trans(b_k), input_precision=PRECISION) * b_w
        b_num = tl.dot(b_p, b_v, input_precision=PRECISION) + b_d[:, None] * tl.dot(b_q, C, input_precision=PRECISION)
        b_den = tl.sum(b_p, axis=1) + b_d * tl.sum(b_q * n[None, :], axis=1)
        b_h = b_num / (tl.maximum(tl.abs(b_den), tl.exp(-b_m)) + EPS)[:, None]
        tl.store(h + row_v[:, None] + o_v[None, :], b_h.to(h.dtype.element_ty), mask=mask_tv)

        if STORE_CHUNKS:
            chunk = i_bh * NC + i_c
            tl.store(cs + chunk * K * V + o_k[:, None] * V + o_v[None, :], C, mask=mask_kv)
            if i_v == 0:
                tl.store(ns + chunk * K + o_k, n, mask=mask_k)
                tl.store(ms + chunk, m)

        m_end = _last(b_m, o_t, BT)
        b_end = _last(b_b, o_t, BT)
        d_end = tl.exp(b_end + m - m_end)
        b_kw = b_k * tl.exp(b_g + b_end - m_end)[:, None]
        C = d_end * C + tl.dot(tl.trans(b_kw), b_v, input_precision=PRECISION)
        n = d_end * n + tl.sum(b_kw, axis=0)
        m = m_end

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
    HAS_INIT: tl.constexpr, HAS_DFINAL: tl.constexpr, PRECISION: tl.constexpr,
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

        t = i_c * BT + o_t
        mask_t = t < T
        row_qk = (i_b * T + t) * H * K + i_h * K
        row_v = (i_b * T + t) * H * V + i_h * V
        mask_tk = mask_t[:, None] & mask_k[None, :]
        mask_tv = mask_t[:, None] & mask_v[None, :]
        b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32) * scale
        b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
        b_dh = tl.load(dh + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
        gate = (i_b * T + t) * H + i_h
        b_i = tl.load(ig + gate, mask=mask_t, other=-1e30).to(tl.float32)
        b_f = tl.load(fg + gate, mask=mask_t, other=0.0).to(tl.float32)

        # Recompute the chunk's forward from its start state.
        b_b = tl.cumsum(tl.where(mask_t, _logsigmoid(b_f), 0.0), axis=0)
        b_g = b_i - b_b
        b_m = b_b + tl.maximum(m0, tl.max(tl.where(causal, b_g[None, :], float("-inf")), axis=1))
        b_w = tl.exp(tl.where(causal, b_g[None, :] + (b_b - b_m)[:, None], float("-inf")))
        b_d = tl.exp(b_b + m0 - b_m)
        b_p = tl.dot(b_q, tl.trans(b_k), input_precision=PRECISION) * b_w
        b_qc = tl.dot(b_q, C0, input_precision=PRECISION)
        b_qn = tl.sum(b_q * n0[None, :], axis=1)
        b_num = tl.dot(b_p, b_v, input_precision=PRECISION) + b_d[:, None] * b_qc
        b_den = tl.sum(b_p, axis=1) + b_d * b_qn
        b_floor = tl.exp(-b_m)
        b_denom = tl.maximum(tl.abs(b_den), b_floor) + EPS

        # Read-out: h = num / denom, denom = max(|den|, exp(-m)) + eps.
        b_dnum = b_dh / b_denom[:, None]
        b_sign = tl.where(b_den > 0, 1.0, tl.where(b_den < 0, -1.0, 0.0))
        b_dden = tl.where(tl.abs(b_den) > b_floor, b_sign, 0.0) * (-tl.sum(b_dnum * b_num, axis=1) / b_denom)

        # Intra-chunk part: P = w * (q k^T), num = P v + d qC0, den = P 1 + d q.n0.
        b_dp = tl.dot(b_dnum, tl.trans(b_v), input_precision=PRECISION) + b_dden[:, None]
        b_ds = b_dp * b_w
        b_dlogw = b_dp * b_p
        b_dq = tl.dot(b_ds, b_k, input_precision=PRECISION) + b_d[:, None] * (
            tl.dot(b_dnum, tl.trans(C0), input_precision=PRECISION) + b_dden[:, None] * n0[None, :]
        )
        b_dk = tl.dot(tl.trans(b_ds), b_q, input_precision=PRECISION)
        b_dv = tl.dot(tl.trans(b_p), b_dnum, input_precision=PRECISION)
        b_dd = tl.sum(b_dnum * b_qc, axis=1) + b_dden * b_qn

        # Chunk-end state: C_end = d_end C0 + sum_s w_end_s k_s v_s^T (likewise n), fed by dC, dn of the next chunk.
        m_end = _last(b_m, o_t, BT)
        b_end = _last(b_b, o_t, BT)
        d_end = tl.exp(b_end + m0 - m_end)
        b_wend = tl.exp(b_g + b_end - m_end)
        b_x = tl.dot(b_v, tl.trans(dC), input_precision=PRECISION) + dn[None, :]
        b_dk += b_wend[:, None] * b_x
        b_dv += b_wend[:, None] * tl.dot(b_k, dC, input_precision=PRECISION)
        b_dlogwend = tl.sum(b_k * b_x, axis=1) * b_wend
        dd_end = tl.sum(tl.sum(C0 * dC, axis=1), axis=0) + tl.sum(n0 * dn, axis=0)

        # Log-weights -> gates: log w_ts = i_s - b_s + b_t - m_t, d_t = exp(b_t + m0 - m_t), b = cumsum(logsig f).
        b_di = tl.sum(b_dlogw, axis=0) + b_dlogwend
        b_db = tl.sum(b_dlogw, axis=1) - tl.sum(b_dlogw, axis=0) + b_dd * b_d - b_dlogwend
        b_db += tl.where(o_t == BT - 1, tl.sum(b_dlogwend, axis=0) + dd_end * d_end, 0.0)
        b_dlogf = tl.sum(b_db, axis=0) - tl.cumsum(b_db, axis=0) + b_db
        b_df = b_dlogf * tl.sigmoid(-b_f)

        tl.store(dq + row_qk[:, None] + o_k[None, :], (b_dq * scale).to(dq.dtype.element_ty), mask=mask_tk)
        tl.store(dk + row_qk[:, None] + o_k[None, :], b_dk.to(dk.dtype.element_ty), mask=mask_tk)
        tl.store(dv + row_v[:, None] + o_v[None, :], b_dv.to(dv.dtype.element_ty), mask=mask_tv)
        tl.store(di + gate, b_di.to(di.dtype.element_ty), mask=mask_t)
        tl.store(df + gate, b_df.to(df.dtype.element_ty), mask=mask_t)

        # Gradient of the chunk-start state, carried to the previous chunk.
        b_qd = b_q * b_d[:, None]
        dC = d_end * dC + tl.dot(tl.trans(b_qd), b_dnum, input_precision=PRECISION)
        dn = d_end * dn + tl.sum(b_qd * b_dden[:, None], axis=0)

    if HAS_INIT:
        tl.store(dc0 + i_bh * K * V + o_k[:, None] * V + o_v[None, :], dC, mask=mask_kv)
        tl.store(dn0 + i_bh * K + o_k, dn, mask=mask_k)


def _num_warps(bk: int, bv: int) -> int:
    return 8 if bk * bv >= 128 * 128 else 4


def _precision(dtype: torch.dtype) -> str:
    """``tl.dot`` precision: full float32 products for float32 inputs, tf32 for bf16/fp16 inputs (their mantissa is
    shorter than tf32's). Operands stay float32 in both cases.

    bf16 operands (half the shared memory, twice the matrix rate) were tried on the H200 with Triton 3.6 and failed
    the check (forward off by 0.46 relative, then an illegal memory access); Triton 3.6's interpreter also multiplies
    bf16 dot operands as raw bits. Both are to be understood before that speed-up comes back.
    """
    return "ieee" if dtype == torch.float32 else "tf32"


def _chunk(length: int, chunk_size: int, bk: int, bv: int) -> int:
    """Tokens per chunk; at most 32 when a state tile is 128 wide, so that the backward fits in shared memory
    (sm_90, float32 operands, K = V = 128: about 400 KB at 64 tokens against a 227 KB limit, 128 KB at 32)."""
    bt = chunk_block(length, chunk_size)
    return min(bt, 32) if max(bk, bv) >= 128 else bt


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
) -> tuple[Tensor, MLSTMState | None, MLSTMState | None]:
    """Forward stage: ``h``, the final state (if asked) and the chunk-start states (if ``store_chunks``).

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, H, V]``; i, f: ``[B, T, H]`` (contiguous).
        scale: multiplies ``q``.
        initial_state: ``(C [B, H, K, V], n [B, H, K], m [B, H])`` or ``None`` (fresh).
        output_final_state: write the state after the last token.
        chunk_size: requested tokens per chunk (rounded, see :func:`kernels.triton._common.chunk_block`).
        store_chunks: keep the state at each chunk start for the backward.

    Returns:
        ``h [B, T, H, V]`` (dtype of ``v``), the final state or ``None``, and ``(cs, ns, ms)`` or ``None``.
    """
    batch, length, heads, k_dim = q.shape
    v_dim = v.shape[-1]
    bk, bv_full = block(k_dim), block(v_dim)
    bt = _chunk(length, chunk_size, bk, bv_full)
    n_chunks = triton.cdiv(length, bt)
    # Split the value width over programs when (batch, head) alone cannot fill the GPU.
    bv = bv_full if batch * heads >= 512 or bv_full <= 32 else max(32, bv_full // 2)
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
    if store_chunks:
        chunks = (
            torch.empty(batch, heads, n_chunks, k_dim, v_dim, device=dev, dtype=f32),
            torch.empty(batch, heads, n_chunks, k_dim, device=dev, dtype=f32),
            torch.empty(batch, heads, n_chunks, device=dev, dtype=f32),
        )
    dummy = m0
    grid = (batch * heads, triton.cdiv(v_dim, bv))
    _mlstm_chunk_fwd_kernel[grid](
        q, k, v, i, f,
        c0 if has_init else dummy, n0 if has_init else dummy, m0,
        h, *(final or (dummy, dummy, dummy)), *(chunks or (dummy, dummy, dummy)),
        scale, length, n_chunks,
        H=heads, K=k_dim, V=v_dim, BT=bt, BK=bk, BV=bv,
        HAS_INIT=has_init, STORE_FINAL=output_final_state, STORE_CHUNKS=store_chunks,
        PRECISION=_precision(v.dtype), num_warps=_num_warps(bk, bv), num_stages=2,
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
) -> tuple[Tensor, ...]:
    """Backward stage: gradients of ``q, k, v, i, f`` and of the initial ``(C, n)`` (``None`` without one).

    Args:
        q, k, v, i, f: the forward inputs (contiguous).
        chunks: ``(cs, ns, ms)`` from :func:`mlstm_chunk_fwd` with ``store_chunks=True``.
        dh: ``[B, T, H, V]`` gradient of the output.
        d_final: gradients of the final ``(C, n)``; ``None`` entries are zeros.
        scale: multiplies ``q``.
        chunk_size: the forward's requested chunk size.
        has_init: whether the forward had an initial state (then its gradient is returned).
    """
    batch, length, heads, k_dim = q.shape
    v_dim = v.shape[-1]
    bk, bv = block(k_dim), block(v_dim)
    bt = _chunk(length, chunk_size, bk, bv)
    n_chunks = triton.cdiv(length, bt)
    dev = q.device
    f32 = torch.float32
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
    _mlstm_chunk_bwd_kernel[(batch * heads,)](
        q, k, v, i, f, *chunks, dh.contiguous(),
        dct if has_dfinal else dummy, dnt if has_dfinal else dummy,
        dq, dk, dv, di, df, dc0 if has_init else dummy, dn0 if has_init else dummy,
        scale, length, n_chunks,
        H=heads, K=k_dim, V=v_dim, BT=bt, BK=bk, BV=bv,
        HAS_INIT=has_init, HAS_DFINAL=has_dfinal, PRECISION=_precision(v.dtype),
        num_warps=_num_warps(bk, bv), num_stages=1,
    )  # fmt: skip
    return dq, dk, dv, di, df, dc0, dn0


class MLSTMChunkFunction(torch.autograd.Function):
    """Autograd wrapper: :func:`mlstm_chunk_fwd` forward, :func:`mlstm_chunk_bwd` backward."""

    @staticmethod
    def forward(ctx, q, k, v, i, f, c0, n0, m0, scale, chunk_size, output_final_state):
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
        )
        if chunks is not None:
            ctx.save_for_backward(q, k, v, i, f, *chunks)
        ctx.scale, ctx.chunk_size, ctx.has_init = scale, chunk_size, has_init
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
        )
        if dc0 is not None:
            dc0, dn0 = dc0.to(ctx.c0_dtype), dn0.to(ctx.c0_dtype)
        return dq, dk, dv, di, df, dc0, dn0, None, None, None, None


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
) -> tuple[Tensor, MLSTMState | None]:
    """The mLSTM over a sequence with the chunkwise Triton kernels (same meaning as :func:`kernels.ops.mlstm`).

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

    Returns:
        ``h [B, T, H, V]`` in the dtype of ``v`` and the final ``(C, n, m)`` or ``None``.

    Example:
        >>> q = k = torch.randn(2, 100, 4, 64, device="cuda"); v = torch.randn(2, 100, 4, 64, device="cuda")
        >>> i = f = torch.randn(2, 100, 4, device="cuda")
        >>> h, (C, n, m) = mlstm_chunk(q, k, v, i, f, output_final_state=True)
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    c0, n0, m0 = initial_state if initial_state is not None else (None, None, None)
    h, ct, nt, mt = MLSTMChunkFunction.apply(q, k, v, i, f, c0, n0, m0, scale, chunk_size, output_final_state)
    return h, ((ct, nt, mt) if output_final_state else None)
