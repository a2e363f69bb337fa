"""The sequential path of the mLSTM chunkwise kernels: one program per ``(batch, head)`` walks the chunks in order.

Best when there are many ``(batch, head)`` pairs or a single chunk (:func:`tsfm.kernels.mlstm.chunk.use_split`
decides). Same math as the split path (:mod:`.chunk_split`), through the chunk body of :mod:`.chunk_common`:

* ``_mlstm_chunk_fwd_kernel``, grid ``(B*H, value blocks)``: keeps ``C [K, BV]``, ``n [K]`` and ``m`` on chip,
  writes ``h``, the final state and (for the backward) the state at each chunk start. The value width is split over
  programs when ``(batch, head)`` alone cannot fill the GPU; that split keeps float32 operands.
* ``_mlstm_chunk_bwd_kernel``, grid ``(B*H,)``: walks the chunks in reverse, keeps ``dC`` and ``dn`` on chip,
  recomputes each chunk's forward from its stored start state and writes ``dq, dk, dv, dĩ, df̃`` and the initial
  state's gradient.
"""

from __future__ import annotations

import triton
import triton.language as tl
from torch import Tensor

from tsfm.kernels.mlstm.chunk_common import (
    ChunkGrid,
    MLSTMState,
    chunk_bwd,
    dstate_increment,
    gates,
    num_warps,
    readout,
    rows,
    scale_q,
    stabiliser,
    state_update,
)


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
        mask_t, row_qk, row_v, gate = rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
        mask_tk = mask_t[:, None] & mask_k[None, :]
        mask_tv = mask_t[:, None] & mask_v[None, :]
        b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_q, q_scale = scale_q(b_q, scale, DOT_BF16)
        b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
        _, b_b, b_g = gates(ig, fg, gate, mask_t)

        b_m = stabiliser(b_b, b_g, m, causal)
        _, _, _, _, _, b_num, _, _, b_denom = readout(
            b_q, q_scale, b_k, b_v, b_b, b_g, b_m, C, n, m, causal, PRECISION, DOT_BF16
        )
        tl.store(h + row_v[:, None] + o_v[None, :], (b_num / b_denom[:, None]).to(h.dtype.element_ty), mask=mask_tv)

        if STORE_CHUNKS:
            chunk = i_bh * NC + i_c
            tl.store(cs + chunk * K * V + o_k[:, None] * V + o_v[None, :], C, mask=mask_kv)
            if i_v == 0:
                tl.store(ns + chunk * K + o_k, n, mask=mask_k)
                tl.store(ms + chunk, m)

        C, n, m = state_update(C, n, m, b_k, b_v, b_b, b_g, o_t, BT, PRECISION, DOT_BF16)

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

        mask_t, row_qk, row_v, gate = rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
        mask_tk = mask_t[:, None] & mask_k[None, :]
        mask_tv = mask_t[:, None] & mask_v[None, :]
        b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_q, q_scale = scale_q(b_q, scale, DOT_BF16)
        b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
        b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
        b_dh = tl.load(dh + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
        b_f, b_b, b_g = gates(ig, fg, gate, mask_t)

        b_dq, b_dk, b_dv, b_di, b_df, b_d, b_dnum, b_dden, d_end = chunk_bwd(
            b_q, q_scale, b_k, b_v, b_dh, b_f, b_b, b_g, C0, n0, m0, dC, dn, o_t, causal, BT, PRECISION, DOT_BF16
        )
        tl.store(dq + row_qk[:, None] + o_k[None, :], (b_dq * scale).to(dq.dtype.element_ty), mask=mask_tk)
        tl.store(dk + row_qk[:, None] + o_k[None, :], b_dk.to(dk.dtype.element_ty), mask=mask_tk)
        tl.store(dv + row_v[:, None] + o_v[None, :], b_dv.to(dv.dtype.element_ty), mask=mask_tv)
        tl.store(di + gate, b_di.to(di.dtype.element_ty), mask=mask_t)
        tl.store(df + gate, b_df.to(df.dtype.element_ty), mask=mask_t)

        # Gradient of the chunk-start state, carried to the previous chunk.
        b_dC, b_dn = dstate_increment(b_q, q_scale, b_d, b_dnum, b_dden, PRECISION, DOT_BF16)
        dC = d_end * dC + b_dC
        dn = d_end * dn + b_dn

    if HAS_INIT:
        tl.store(dc0 + i_bh * K * V + o_k[:, None] * V + o_v[None, :], dC, mask=mask_kv)
        tl.store(dn0 + i_bh * K + o_k, dn, mask=mask_k)


def value_block(grid: ChunkGrid) -> int:
    """Value columns per forward program: the whole width, or half of it (not below 32) when fewer than 512
    ``(batch, head)`` pairs would leave the GPU idle."""
    return grid.bv if grid.batch_heads >= 512 or grid.bv <= 32 else max(32, grid.bv // 2)


def sequential_fwd(
    *,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    i: Tensor,
    f: Tensor,
    initial_state: MLSTMState,
    has_init: bool,
    scale: float,
    grid: ChunkGrid,
    h: Tensor,
    final: MLSTMState | None,
    chunks: MLSTMState | None,
) -> None:
    """Forward of the sequential path: writes ``h``, the final state into ``final`` and the chunk-start states into
    ``chunks`` (each only when given).

    Args:
        q, k, v, i, f: the inputs (contiguous).
        initial_state: ``(C, n, m)``; ``C, n`` are read only when ``has_init`` (``m`` is ``-inf`` otherwise).
        has_init: whether the call has an initial state.
        scale: multiplies ``q``.
        grid: the call's geometry (:class:`ChunkGrid`).
        h: ``[B, T, H, V]`` output buffer.
        final: ``(C, n, m)`` buffers of the final state, or ``None``.
        chunks: ``(cs, ns, ms)`` buffers of the chunk-start states, or ``None``.
    """
    bv = value_block(grid)
    c0, n0, m0 = initial_state
    ct, nt, mt = final or (m0, m0, m0)
    cs, ns, ms = chunks or (m0, m0, m0)
    _mlstm_chunk_fwd_kernel[(grid.batch_heads, triton.cdiv(grid.v_dim, bv))](
        q=q, k=k, v=v, ig=i, fg=f, c0=c0, n0=n0, m0=m0,
        h=h, ct=ct, nt=nt, mt=mt, cs=cs, ns=ns, ms=ms,
        scale=scale, T=grid.length, NC=grid.n_chunks,
        # a value-split forward keeps float32 operands (see benchmarks/RESULTS.md)
        **grid.constexprs(BV=bv, DOT_BF16=grid.dot_bf16 and bv == grid.bv),
        HAS_INIT=has_init, STORE_FINAL=final is not None, STORE_CHUNKS=chunks is not None,
        num_warps=num_warps(grid.bk, bv), num_stages=2,
    )  # fmt: skip


def sequential_bwd(
    *,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    i: Tensor,
    f: Tensor,
    chunks: MLSTMState,
    dh: Tensor,
    d_final: tuple[Tensor, Tensor] | None,
    scale: float,
    grid: ChunkGrid,
    grads: tuple[Tensor, Tensor, Tensor, Tensor, Tensor],
    d_initial: tuple[Tensor, Tensor] | None,
) -> None:
    """Backward of the sequential path: writes ``grads = (dq, dk, dv, dĩ, df̃)`` and, when given, the initial
    state's gradient ``d_initial = (dC_0, dn_0)``.

    Args:
        q, k, v, i, f: the forward inputs (contiguous).
        chunks: ``(cs, ns, ms)`` chunk-start states of the forward.
        dh: ``[B, T, H, V]`` gradient of the output (contiguous).
        d_final: float32 gradients of the final ``(C, n)``, or ``None`` (zeros).
        scale: multiplies ``q``.
        grid: the forward's geometry.
        grads: output buffers of ``dq, dk, dv, dĩ, df̃``.
        d_initial: output buffers of the initial ``(dC, dn)``, or ``None``.
    """
    dummy = chunks[2]
    dct, dnt = d_final or (dummy, dummy)
    dc0, dn0 = d_initial or (dummy, dummy)
    dq, dk, dv, di, df = grads
    _mlstm_chunk_bwd_kernel[(grid.batch_heads,)](
        q=q, k=k, v=v, ig=i, fg=f, cs=chunks[0], ns=chunks[1], ms=chunks[2], dh=dh, dct=dct, dnt=dnt,
        dq=dq, dk=dk, dv=dv, di=di, df=df, dc0=dc0, dn0=dn0,
        scale=scale, T=grid.length, NC=grid.n_chunks,
        **grid.constexprs(), HAS_INIT=d_initial is not None, HAS_DFINAL=d_final is not None,
        num_warps=num_warps(grid.bk, grid.bv), num_stages=1,
    )  # fmt: skip
