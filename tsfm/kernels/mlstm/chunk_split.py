"""The split path of the mLSTM chunkwise kernels (the FLA / mlstm_kernels ``limit_chunk`` structure): parallel over
chunks, for long sequences over few ``(batch, head)`` pairs, where the sequential path (:mod:`.chunk_sequential`)
leaves most of the GPU idle while one program walks hundreds of chunks.

Only a light recurrence stays sequential; the ``O(L^2)`` work runs with one program per chunk. Same math as the
sequential path, through the chunk body of :mod:`.chunk_common`. Forward, two stages:

* :func:`chunk_states` (``_mlstm_chunk_states_kernel``, grid ``(B*H, K-tiles, V-tiles)``): the state recurrence
  alone (``k, v, ĩ, f̃``, no ``q``, no output), writing the state at each chunk start and the final state.
* :func:`chunk_outputs` (``_mlstm_chunk_out_kernel``, grid ``(B*H, chunks, V-blocks)``): ``h`` of one chunk from
  its start state.

Backward, three stages:

* :func:`chunk_dstate_local` (grid ``(B*H, chunks)``): each chunk's own contribution to the gradient of its start
  state, ``(q d)^T dnum`` and ``(q d)^T dden`` (``dden`` sums over the whole value width, so it is done here,
  unsplit), and ``d_end``.
* :func:`chunk_dstate_scan` (grid ``(B*H, K-tiles, V-tiles)``): the reverse recurrence
  ``dC <- d_end dC + increment``, elementwise on ``[K, V]`` tiles, so it splits over both widths exactly; it
  overwrites each increment with the gradient flowing into that chunk's end and writes the initial state's gradient.
* :func:`chunk_input_grads` (grid ``(B*H, chunks)``): ``dq, dk, dv, dĩ, df̃`` of one chunk from its start state and
  its end-state gradient (the sequential backward's loop body).

Extra memory (float32): the chunk-start states ``[B, H, NC, K, V]`` (with ``[B, H, NC, K]`` and ``[B, H, NC]``)
even without a backward (scratch between the two forward stages), and in the backward the per-chunk state
gradients, the same size again: ``4 K V / L`` bytes per (token, head), e.g. 256 B at ``K = V = 64, L = 64``.
"""

from __future__ import annotations

import triton
import triton.language as tl
from torch import Tensor

from tsfm.kernels.mlstm.chunk_common import (
    ChunkGrid,
    MLSTMState,
    chunk_bwd,
    chunk_end,
    dstate_increment,
    gates,
    num_warps,
    num_warps_per_chunk,
    readout,
    readout_grad,
    rows,
    scale_q,
    stabiliser,
    state_update,
)


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

        mask_t, row_qk, row_v, gate = rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
        b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_t[:, None] & mask_k[None, :], other=0.0)
        b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_t[:, None] & mask_v[None, :], other=0.0)
        _, b_b, b_g = gates(ig, fg, gate, mask_t)
        b_k, b_v = b_k.to(tl.float32), b_v.to(tl.float32)
        C, n, m = state_update(C, n, m, b_k, b_v, b_b, b_g, o_t, BT, PRECISION, DOT_BF16)

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

    mask_t, row_qk, row_v, gate = rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
    mask_tk = mask_t[:, None] & mask_k[None, :]
    mask_tv = mask_t[:, None] & mask_v[None, :]
    b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_q, q_scale = scale_q(b_q, scale, DOT_BF16)
    b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    _, b_b, b_g = gates(ig, fg, gate, mask_t)

    b_m = stabiliser(b_b, b_g, m0, causal)
    _, _, _, _, _, b_num, _, _, b_denom = readout(
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

    mask_t, row_qk, row_v, gate = rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
    mask_tk = mask_t[:, None] & mask_k[None, :]
    mask_tv = mask_t[:, None] & mask_v[None, :]
    b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_q, q_scale = scale_q(b_q, scale, DOT_BF16)
    b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    b_dh = tl.load(dh + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    _, b_b, b_g = gates(ig, fg, gate, mask_t)

    b_m = stabiliser(b_b, b_g, m0, causal)
    _, b_d, _, _, _, b_num, b_den, b_floor, b_denom = readout(
        b_q, q_scale, b_k, b_v, b_b, b_g, b_m, C0, n0, m0, causal, PRECISION, DOT_BF16
    )
    b_dnum, b_dden = readout_grad(b_dh, b_num, b_den, b_floor, b_denom)
    b_dC, b_dn = dstate_increment(b_q, q_scale, b_d, b_dnum, b_dden, PRECISION, DOT_BF16)
    _, d_end, _ = chunk_end(b_b, b_g, m0, o_t, BT)
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

    mask_t, row_qk, row_v, gate = rows(i_b, i_h, i_c, T, o_t, H, K, V, BT)
    mask_tk = mask_t[:, None] & mask_k[None, :]
    mask_tv = mask_t[:, None] & mask_v[None, :]
    b_q = tl.load(q + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_q, q_scale = scale_q(b_q, scale, DOT_BF16)
    b_k = tl.load(k + row_qk[:, None] + o_k[None, :], mask=mask_tk, other=0.0).to(tl.float32)
    b_v = tl.load(v + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    b_dh = tl.load(dh + row_v[:, None] + o_v[None, :], mask=mask_tv, other=0.0).to(tl.float32)
    b_f, b_b, b_g = gates(ig, fg, gate, mask_t)

    b_dq, b_dk, b_dv, b_di, b_df, _, _, _, _ = chunk_bwd(
        b_q, q_scale, b_k, b_v, b_dh, b_f, b_b, b_g, C0, n0, m0, dC, dn, o_t, causal, BT, PRECISION, DOT_BF16
    )
    tl.store(dq + row_qk[:, None] + o_k[None, :], (b_dq * scale).to(dq.dtype.element_ty), mask=mask_tk)
    tl.store(dk + row_qk[:, None] + o_k[None, :], b_dk.to(dk.dtype.element_ty), mask=mask_tk)
    tl.store(dv + row_v[:, None] + o_v[None, :], b_dv.to(dv.dtype.element_ty), mask=mask_tv)
    tl.store(di + gate, b_di.to(di.dtype.element_ty), mask=mask_t)
    tl.store(df + gate, b_df.to(df.dtype.element_ty), mask=mask_t)


def state_tiles(batch_heads: int, bk: int, bv: int) -> tuple[int, int]:
    """``[BK, BV]`` tile of ``C`` per program of the two recurrences (the forward's state pass, the backward's
    state-gradient scan). Their time is the chain over chunks, each link light, so more, smaller chains finish
    sooner: halve the wider side, not below 32, until about 512 programs run."""
    tk, tv = bk, bv
    while batch_heads * (bk // tk) * (bv // tv) < 512 and max(tk, tv) > 32:
        if tv >= tk:
            tv //= 2
        else:
            tk //= 2
    return tk, tv


def chunk_states(
    *,
    k: Tensor,
    v: Tensor,
    i: Tensor,
    f: Tensor,
    initial_state: MLSTMState,
    has_init: bool,
    grid: ChunkGrid,
    chunks: MLSTMState,
    final: MLSTMState | None,
) -> None:
    """Forward stage 1: the state at each chunk start into ``chunks`` and, when given, the final state into
    ``final``. ``initial_state``'s ``C, n`` are read only when ``has_init``."""
    bks, bvs = state_tiles(grid.batch_heads, grid.bk, grid.bv)
    c0, n0, m0 = initial_state
    ct, nt, mt = final or (m0, m0, m0)
    _mlstm_chunk_states_kernel[(grid.batch_heads, triton.cdiv(grid.k_dim, bks), triton.cdiv(grid.v_dim, bvs))](
        k=k, v=v, ig=i, fg=f, c0=c0, n0=n0, m0=m0,
        ct=ct, nt=nt, mt=mt, cs=chunks[0], ns=chunks[1], ms=chunks[2],
        T=grid.length, NC=grid.n_chunks,
        H=grid.heads, K=grid.k_dim, V=grid.v_dim, BT=grid.bt, BK=bks, BV=bvs,
        HAS_INIT=has_init, STORE_FINAL=final is not None, PRECISION=grid.precision, DOT_BF16=grid.dot_bf16,
        num_warps=num_warps(bks, bvs), num_stages=2,
    )  # fmt: skip


def chunk_outputs(
    *, q: Tensor, k: Tensor, v: Tensor, i: Tensor, f: Tensor, chunks: MLSTMState, scale: float, grid: ChunkGrid,
    h: Tensor,
) -> None:  # fmt: skip
    """Forward stage 2: ``h`` of every chunk from its start state, all chunks in parallel."""
    _mlstm_chunk_out_kernel[(grid.batch_heads, grid.n_chunks, triton.cdiv(grid.v_dim, grid.bv))](
        q=q, k=k, v=v, ig=i, fg=f, cs=chunks[0], ns=chunks[1], ms=chunks[2], h=h,
        scale=scale, T=grid.length, NC=grid.n_chunks, **grid.constexprs(),
        num_warps=num_warps_per_chunk(grid.bk, grid.bv), num_stages=1,
    )  # fmt: skip


def chunk_dstate_local(
    *, q: Tensor, k: Tensor, v: Tensor, i: Tensor, f: Tensor, chunks: MLSTMState, dh: Tensor, scale: float,
    grid: ChunkGrid, dchunks: MLSTMState,
) -> None:  # fmt: skip
    """Backward stage 1: each chunk's own term of its start-state gradient into ``dchunks = (dcs, dns)`` and its
    start state's decay ``d_end`` into ``dchunks[2]``."""
    _mlstm_chunk_dstate_local_kernel[(grid.batch_heads, grid.n_chunks)](
        q=q, k=k, v=v, ig=i, fg=f, cs=chunks[0], ns=chunks[1], ms=chunks[2], dh=dh,
        dcs=dchunks[0], dns=dchunks[1], dds=dchunks[2],
        scale=scale, T=grid.length, NC=grid.n_chunks, **grid.constexprs(),
        num_warps=num_warps_per_chunk(grid.bk, grid.bv), num_stages=1,
    )  # fmt: skip


def chunk_dstate_scan(
    *,
    dchunks: MLSTMState,
    d_final: tuple[Tensor, Tensor] | None,
    grid: ChunkGrid,
    d_initial: tuple[Tensor, Tensor] | None,
) -> None:
    """Backward stage 2: the reverse scan over chunks; each chunk's increment in ``dchunks`` becomes the gradient of
    that chunk's end state, and the initial state's gradient goes into ``d_initial`` when given."""
    bks, bvs = state_tiles(grid.batch_heads, grid.bk, grid.bv)
    dummy = dchunks[2]
    dct, dnt = d_final or (dummy, dummy)
    dc0, dn0 = d_initial or (dummy, dummy)
    _mlstm_chunk_dstate_scan_kernel[(grid.batch_heads, triton.cdiv(grid.k_dim, bks), triton.cdiv(grid.v_dim, bvs))](
        dcs=dchunks[0], dns=dchunks[1], dds=dchunks[2], dct=dct, dnt=dnt, dc0=dc0, dn0=dn0,
        NC=grid.n_chunks, K=grid.k_dim, V=grid.v_dim, BK=bks, BV=bvs,
        HAS_INIT=d_initial is not None, HAS_DFINAL=d_final is not None,
        num_warps=4, num_stages=2,
    )  # fmt: skip


def chunk_input_grads(
    *, q: Tensor, k: Tensor, v: Tensor, i: Tensor, f: Tensor, chunks: MLSTMState, dh: Tensor,
    dchunks: MLSTMState, scale: float, grid: ChunkGrid, grads: tuple[Tensor, Tensor, Tensor, Tensor, Tensor],
) -> None:  # fmt: skip
    """Backward stage 3: ``grads = (dq, dk, dv, dĩ, df̃)`` of every chunk from its start state and its end-state
    gradient, all chunks in parallel."""
    dq, dk, dv, di, df = grads
    _mlstm_chunk_bwd_local_kernel[(grid.batch_heads, grid.n_chunks)](
        q=q, k=k, v=v, ig=i, fg=f, cs=chunks[0], ns=chunks[1], ms=chunks[2], dh=dh, dcs=dchunks[0], dns=dchunks[1],
        dq=dq, dk=dk, dv=dv, di=di, df=df,
        scale=scale, T=grid.length, NC=grid.n_chunks, **grid.constexprs(),
        num_warps=num_warps_per_chunk(grid.bk, grid.bv), num_stages=1,
    )  # fmt: skip


def split_fwd(
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
    chunks: MLSTMState,
) -> None:
    """Forward of the split path (arguments as :func:`tsfm.kernels.mlstm.chunk_sequential.sequential_fwd`, but
    ``chunks`` is required: the two stages pass the chunk-start states through it)."""
    chunk_states(k=k, v=v, i=i, f=f, initial_state=initial_state, has_init=has_init, grid=grid, chunks=chunks,
                 final=final)  # fmt: skip
    chunk_outputs(q=q, k=k, v=v, i=i, f=f, chunks=chunks, scale=scale, grid=grid, h=h)


def split_bwd(
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
    """Backward of the split path (arguments as :func:`tsfm.kernels.mlstm.chunk_sequential.sequential_bwd`); it
    holds the per-chunk state gradients, ``[B, H, NC, K, V]`` float32, while it runs."""
    dchunks = grid.empty_states(q.device, per_chunk=True)
    chunk_dstate_local(q=q, k=k, v=v, i=i, f=f, chunks=chunks, dh=dh, scale=scale, grid=grid, dchunks=dchunks)
    chunk_dstate_scan(dchunks=dchunks, d_final=d_final, grid=grid, d_initial=d_initial)
    chunk_input_grads(q=q, k=k, v=v, i=i, f=f, chunks=chunks, dh=dh, dchunks=dchunks, scale=scale, grid=grid,
                      grads=grads)  # fmt: skip
