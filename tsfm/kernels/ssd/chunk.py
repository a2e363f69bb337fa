"""Mamba-2 SSD chunkwise Triton kernels: forward, backward and the autograd function that calls them as named stages.

The math is that of :func:`tsfm.kernels.ssd.reference.ssd_chunkwise` (the executable spec). SSD is linear attention with
one scalar decay per token: query ``C``, key ``B``, value ``v = dt x`` and log-decay ``a_t = -A dt_t <= 0``. Inside
a chunk of ``L`` tokens, with ``b_t = a_1 + ... + a_t`` the cumulative log-decay from the chunk start and ``S_0`` the
carried state::

    y_t   = sum_{s<=t} exp(b_t - b_s) (C_t . B_s) v_s + exp(b_t) C_t^T S_0
    S_end = exp(b_L) S_0 + sum_s exp(b_L - b_s) B_s v_s^T

Every exponent is ``<= 0`` (the decays are at most 1), so no stabiliser is needed: future entries are masked to
``-inf`` *before* ``exp`` (their ``b_t - b_s`` is positive and can overflow), everything else is in ``[0, 1]``.

Backward, with ``dy`` the output's gradient and ``dS`` that of ``S_end`` (fed back from the next chunk):
``dG = (dy v^T) * exp(b_t - b_s)`` (masked), ``dC = dG B + exp(b) dy S_0^T``, ``dB = dG^T C + exp(b_L - b) v dS^T``,
``dv = (G * exp(.))^T dy + exp(b_L - b) B dS``, ``dS_0 = (exp(b) C)^T dy + exp(b_L) dS``. Every term of ``dC`` carries
``exp(+b_t)`` and every term of ``dB`` carries ``exp(-b_s)``, so the log-decay gradient is ``db_t = C_t . dC_t -
B_t . dB_t`` plus, on the chunk's last row, the ``exp(b_L)`` terms of ``S_end``: ``sum_s exp(b_L - b_s) B_s . (v_s
dS^T) + exp(b_L) <S_0, dS>``. Then ``da = reverse cumsum(db)``; ``dt`` collects ``x . dv - A da`` (the write and the
decay) and ``dA = -sum dt da`` over batch and time (each program sums its head's tokens, the wrapper sums over
batch).

Kernels (one program per ``(batch, head)``; the forward also splits the value width ``P`` over programs):

* ``_ssd_chunk_fwd_kernel``: walks the chunks in order, keeps ``S [N, P]`` on chip, writes ``y``, the final state and
  (for the backward) the state at each chunk start.
* ``_ssd_chunk_bwd_kernel``: walks the chunks in reverse, keeps ``dS`` on chip, recomputes each chunk's forward from
  its stored start state and writes ``dx, ddt, dB, dC``, a per-``(batch, head)`` partial ``dA`` and the initial
  state's gradient.

Ragged tails are masked, never padded in memory: a token past ``T`` reads ``x = B = C = 0`` and ``dt = 0`` (no
decay, no write), so the cumulative log-decay at the chunk's last row is that of the last real token and the state
there is the state after it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from tsfm.kernels._triton_common import block, chunk_block, contiguous
from tsfm.kernels._triton_common import last_row as _last


@triton.jit
def _ssd_chunk_fwd_kernel(
    x, dt, A, Bm, Cm, s0,  # inputs x [B, T, H, P], dt [B, T, H], A [H], B/C [B, T, H, N], initial state [B, H, N, P]
    y, st, ss,  # output [B, T, H, P], final state [B, H, N, P], state at each chunk start [B, H, NC, N, P]
    T, NC,
    H: tl.constexpr, N: tl.constexpr, P: tl.constexpr,
    BT: tl.constexpr, BN: tl.constexpr, BP: tl.constexpr,
    HAS_INIT: tl.constexpr, STORE_FINAL: tl.constexpr, STORE_CHUNKS: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    i_bh = tl.program_id(0)
    i_p = tl.program_id(1)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    o_n = tl.arange(0, BN)
    o_p = i_p * BP + tl.arange(0, BP)
    mask_n = o_n < N
    mask_p = o_p < P
    mask_np = mask_n[:, None] & mask_p[None, :]
    causal = o_t[:, None] >= o_t[None, :]
    a_h = tl.load(A + i_h).to(tl.float32)

    if HAS_INIT:
        S = tl.load(s0 + i_bh * N * P + o_n[:, None] * P + o_p[None, :], mask=mask_np, other=0.0).to(tl.float32)
    else:
        S = tl.zeros([BN, BP], dtype=tl.float32)

    for i_c in range(NC):
        t = i_c * BT + o_t
        mask_t = t < T
        row_n = (i_b * T + t) * H * N + i_h * N
        row_p = (i_b * T + t) * H * P + i_h * P
        mask_tn = mask_t[:, None] & mask_n[None, :]
        mask_tp = mask_t[:, None] & mask_p[None, :]
        b_C = tl.load(Cm + row_n[:, None] + o_n[None, :], mask=mask_tn, other=0.0).to(tl.float32)
        b_B = tl.load(Bm + row_n[:, None] + o_n[None, :], mask=mask_tn, other=0.0).to(tl.float32)
        b_x = tl.load(x + row_p[:, None] + o_p[None, :], mask=mask_tp, other=0.0).to(tl.float32)
        b_dt = tl.load(dt + (i_b * T + t) * H + i_h, mask=mask_t, other=0.0).to(tl.float32)

        b_b = tl.cumsum(-a_h * b_dt, axis=0)  # padded rows add 0: b at the last row is that of the last real token
        b_v = b_x * b_dt[:, None]
        b_w = tl.exp(tl.where(causal, b_b[:, None] - b_b[None, :], float("-inf")))  # mask before exp
        b_m = tl.dot(b_C, tl.trans(b_B), input_precision=PRECISION) * b_w
        b_y = tl.dot(b_m, b_v, input_precision=PRECISION)
        b_y += tl.exp(b_b)[:, None] * tl.dot(b_C, S, input_precision=PRECISION)
        tl.store(y + row_p[:, None] + o_p[None, :], b_y.to(y.dtype.element_ty), mask=mask_tp)

        if STORE_CHUNKS:
            tl.store(ss + (i_bh * NC + i_c) * N * P + o_n[:, None] * P + o_p[None, :], S, mask=mask_np)

        b_end = _last(b_b, o_t, BT)
        b_Bw = b_B * tl.exp(b_end - b_b)[:, None]
        S = tl.exp(b_end) * S + tl.dot(tl.trans(b_Bw), b_v, input_precision=PRECISION)

    if STORE_FINAL:
        tl.store(st + i_bh * N * P + o_n[:, None] * P + o_p[None, :], S, mask=mask_np)


@triton.jit
def _ssd_chunk_bwd_kernel(
    x, dt, A, Bm, Cm, ss, dy, dst,  # inputs, chunk-start states, output and final-state gradients
    dx, ddt, dA, dB, dC, ds0,  # gradients; dA is a partial [B, H] (the wrapper sums over batch)
    T, NC,
    H: tl.constexpr, N: tl.constexpr, P: tl.constexpr,
    BT: tl.constexpr, BN: tl.constexpr, BP: tl.constexpr,
    HAS_INIT: tl.constexpr, HAS_DFINAL: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    i_bh = tl.program_id(0)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    o_n = tl.arange(0, BN)
    o_p = tl.arange(0, BP)
    mask_n = o_n < N
    mask_p = o_p < P
    mask_np = mask_n[:, None] & mask_p[None, :]
    causal = o_t[:, None] >= o_t[None, :]
    a_h = tl.load(A + i_h).to(tl.float32)

    if HAS_DFINAL:
        dS = tl.load(dst + i_bh * N * P + o_n[:, None] * P + o_p[None, :], mask=mask_np, other=0.0).to(tl.float32)
    else:
        dS = tl.zeros([BN, BP], dtype=tl.float32)
    dA_acc = tl.full([], 0.0, dtype=tl.float32)

    for j in range(NC):
        i_c = NC - 1 - j
        S0 = tl.load(ss + (i_bh * NC + i_c) * N * P + o_n[:, None] * P + o_p[None, :], mask=mask_np, other=0.0)

        t = i_c * BT + o_t
        mask_t = t < T
        row_n = (i_b * T + t) * H * N + i_h * N
        row_p = (i_b * T + t) * H * P + i_h * P
        gate = (i_b * T + t) * H + i_h
        mask_tn = mask_t[:, None] & mask_n[None, :]
        mask_tp = mask_t[:, None] & mask_p[None, :]
        b_C = tl.load(Cm + row_n[:, None] + o_n[None, :], mask=mask_tn, other=0.0).to(tl.float32)
        b_B = tl.load(Bm + row_n[:, None] + o_n[None, :], mask=mask_tn, other=0.0).to(tl.float32)
        b_x = tl.load(x + row_p[:, None] + o_p[None, :], mask=mask_tp, other=0.0).to(tl.float32)
        b_dy = tl.load(dy + row_p[:, None] + o_p[None, :], mask=mask_tp, other=0.0).to(tl.float32)
        b_dt = tl.load(dt + gate, mask=mask_t, other=0.0).to(tl.float32)

        # Recompute the chunk's forward weights.
        b_b = tl.cumsum(-a_h * b_dt, axis=0)
        b_v = b_x * b_dt[:, None]
        b_w = tl.exp(tl.where(causal, b_b[:, None] - b_b[None, :], float("-inf")))
        b_eb = tl.exp(b_b)
        b_end = _last(b_b, o_t, BT)
        e_end = tl.exp(b_end)
        b_wend = tl.exp(b_end - b_b)

        # Output: y = (G * w) v + exp(b) C S0, G = C B^T.
        b_m = tl.dot(b_C, tl.trans(b_B), input_precision=PRECISION) * b_w
        b_dg = tl.dot(b_dy, tl.trans(b_v), input_precision=PRECISION) * b_w
        b_dC = tl.dot(b_dg, b_B, input_precision=PRECISION)
        b_dC += b_eb[:, None] * tl.dot(b_dy, tl.trans(S0), input_precision=PRECISION)
        b_dB = tl.dot(tl.trans(b_dg), b_C, input_precision=PRECISION)
        b_dv = tl.dot(tl.trans(b_m), b_dy, input_precision=PRECISION)

        # Chunk-end state: S_end = exp(b_L) S0 + sum_s exp(b_L - b_s) B_s v_s^T, fed by dS of the next chunk.
        b_dBend = b_wend[:, None] * tl.dot(b_v, tl.trans(dS), input_precision=PRECISION)
        b_dv += b_wend[:, None] * tl.dot(b_B, dS, input_precision=PRECISION)
        end_terms = tl.sum(tl.sum(b_B * b_dBend, axis=1), axis=0) + e_end * tl.sum(tl.sum(S0 * dS, axis=1), axis=0)
        b_dB += b_dBend

        # Log-decay: every dC term carries exp(+b_t), every dB term exp(-b_s); the exp(b_L) terms sit on the last row.
        b_db = tl.sum(b_C * b_dC, axis=1) - tl.sum(b_B * b_dB, axis=1)
        b_db += tl.where(o_t == BT - 1, end_terms, 0.0)
        b_da = tl.sum(b_db, axis=0) - tl.cumsum(b_db, axis=0) + b_db  # a_u enters every b_t with t >= u
        b_ddt = tl.sum(b_x * b_dv, axis=1) - a_h * b_da  # v = dt x and a = -A dt
        dA_acc += tl.sum(-b_dt * b_da, axis=0)  # padded rows have dt = 0

        tl.store(dx + row_p[:, None] + o_p[None, :], (b_dv * b_dt[:, None]).to(dx.dtype.element_ty), mask=mask_tp)
        tl.store(ddt + gate, b_ddt.to(ddt.dtype.element_ty), mask=mask_t)
        tl.store(dB + row_n[:, None] + o_n[None, :], b_dB.to(dB.dtype.element_ty), mask=mask_tn)
        tl.store(dC + row_n[:, None] + o_n[None, :], b_dC.to(dC.dtype.element_ty), mask=mask_tn)

        # Gradient of the chunk-start state, carried to the previous chunk.
        dS = e_end * dS + tl.dot(tl.trans(b_C * b_eb[:, None]), b_dy, input_precision=PRECISION)

    tl.store(dA + i_bh, dA_acc)
    if HAS_INIT:
        tl.store(ds0 + i_bh * N * P + o_n[:, None] * P + o_p[None, :], dS, mask=mask_np)


def _num_warps(bn: int, bp: int) -> int:
    return 8 if bn * bp >= 128 * 128 else 4


def _precision(*dtypes: torch.dtype) -> str:
    """``tl.dot`` precision: full float32 products when every matmul input is float32, tf32 when any is bf16/fp16
    (their mantissa is shorter than tf32's)."""
    return "ieee" if all(d == torch.float32 for d in dtypes) else "tf32"


def _chunk(length: int, chunk_size: int, bn: int, bp: int) -> int:
    """Tokens per chunk: ``chunk_size`` rounded (:func:`tsfm.kernels._triton_common.chunk_block`), at most 32 when a
    state tile is 128 wide, so that the backward fits in shared memory (sm_90)."""
    bt = chunk_block(length, chunk_size)
    return min(bt, 32) if max(bn, bp) >= 128 else bt


def _value_block(batch_heads: int, bp_full: int) -> int:
    """Value columns per forward program: the whole width, or half of it (not below 32) when fewer than 512
    ``(batch, head)`` pairs would leave the GPU idle."""
    return bp_full if batch_heads >= 512 or bp_full <= 32 else max(32, bp_full // 2)


def ssd_chunk_fwd(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    *,
    initial_state: Tensor | None,
    output_final_state: bool,
    chunk_size: int,
    store_chunks: bool,
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Forward: ``y``, the final state (if asked) and the chunk-start states (if ``store_chunks``).

    Args:
        x: ``[B, T, H, P]``; dt: ``[B, T, H]``; A: ``[H]``; B, C: ``[B, T, H, N]`` (all contiguous).
        initial_state: ``S [B, H, N, P]`` (float32, contiguous) or ``None`` (zeros).
        output_final_state: write the state after the last token.
        chunk_size: requested tokens per chunk (rounded, see :func:`_chunk`).
        store_chunks: keep the state at each chunk start for the backward.

    Returns:
        ``y [B, T, H, P]`` (dtype of ``x``), the float32 final state or ``None``, and the chunk-start states
        ``[B, H, NC, N, P]`` or ``None``.
    """
    batch, length, heads, p_dim = x.shape
    n_dim = B.shape[-1]
    bn, bp_full = block(n_dim), block(p_dim)
    bt = _chunk(length, chunk_size, bn, bp_full)
    n_chunks = triton.cdiv(length, bt)
    bp = _value_block(batch * heads, bp_full)
    dev, f32 = x.device, torch.float32
    y = torch.empty_like(x)
    final = torch.empty(batch, heads, n_dim, p_dim, device=dev, dtype=f32) if output_final_state else None
    chunks = torch.empty(batch, heads, n_chunks, n_dim, p_dim, device=dev, dtype=f32) if store_chunks else None
    _ssd_chunk_fwd_kernel[(batch * heads, triton.cdiv(p_dim, bp))](
        x=x, dt=dt, A=A, Bm=B, Cm=C, s0=y if initial_state is None else initial_state,
        y=y, st=y if final is None else final, ss=y if chunks is None else chunks,
        T=length, NC=n_chunks, H=heads, N=n_dim, P=p_dim, BT=bt, BN=bn, BP=bp,
        HAS_INIT=initial_state is not None, STORE_FINAL=output_final_state, STORE_CHUNKS=store_chunks,
        PRECISION=_precision(x.dtype, B.dtype, C.dtype), num_warps=_num_warps(bn, bp), num_stages=2,
    )  # fmt: skip
    return y, final, chunks


def ssd_chunk_bwd(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    chunks: Tensor,
    dy: Tensor,
    d_final: Tensor | None,
    *,
    chunk_size: int,
    has_init: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor | None]:
    """Backward: gradients of ``x, dt, A, B, C`` and of the initial state (``None`` without one).

    Args:
        x, dt, A, B, C: the forward inputs (contiguous).
        chunks: ``[B, H, NC, N, P]`` chunk-start states from :func:`ssd_chunk_fwd` with ``store_chunks=True``.
        dy: ``[B, T, H, P]`` gradient of the output.
        d_final: gradient of the final state, or ``None`` (zeros).
        chunk_size: the forward's requested chunk size.
        has_init: whether the forward had an initial state (then its float32 gradient is returned).

    Returns:
        ``dx, ddt, dA, dB, dC`` in the dtypes of their inputs and the initial state's gradient or ``None``.
    """
    batch, length, heads, p_dim = x.shape
    n_dim = B.shape[-1]
    bn, bp = block(n_dim), block(p_dim)
    bt = _chunk(length, chunk_size, bn, bp)
    dev, f32 = x.device, torch.float32
    dx, ddt, dB, dC = torch.empty_like(x), torch.empty_like(dt), torch.empty_like(B), torch.empty_like(C)
    dA_part = torch.empty(batch, heads, device=dev, dtype=f32)  # per (batch, head); summed over batch below
    ds0 = torch.empty(batch, heads, n_dim, p_dim, device=dev, dtype=f32) if has_init else None
    _ssd_chunk_bwd_kernel[(batch * heads,)](
        x=x, dt=dt, A=A, Bm=B, Cm=C, ss=chunks, dy=dy.contiguous(),
        dst=dA_part if d_final is None else d_final.float().contiguous(),
        dx=dx, ddt=ddt, dA=dA_part, dB=dB, dC=dC, ds0=dA_part if ds0 is None else ds0,
        T=length, NC=triton.cdiv(length, bt), H=heads, N=n_dim, P=p_dim, BT=bt, BN=bn, BP=bp,
        HAS_INIT=has_init, HAS_DFINAL=d_final is not None, PRECISION=_precision(x.dtype, B.dtype, C.dtype),
        num_warps=_num_warps(bn, bp), num_stages=1,
    )  # fmt: skip
    return dx, ddt, dA_part.sum(0).to(A.dtype), dB, dC, ds0


class SSDChunkFunction(torch.autograd.Function):
    """Autograd wrapper: :func:`ssd_chunk_fwd` forward, :func:`ssd_chunk_bwd` backward."""

    @staticmethod
    def forward(ctx, x, dt, A, B, C, s0, chunk_size, output_final_state):
        x, dt, A, B, C = contiguous(x, dt, A, B, C)
        has_init = s0 is not None
        y, final, chunks = ssd_chunk_fwd(
            x,
            dt,
            A,
            B,
            C,
            initial_state=s0.float().contiguous() if has_init else None,
            output_final_state=output_final_state,
            chunk_size=chunk_size,
            store_chunks=any(ctx.needs_input_grad[:6]),
        )
        if chunks is not None:
            ctx.save_for_backward(x, dt, A, B, C, chunks)
        ctx.chunk_size, ctx.has_init = chunk_size, has_init
        ctx.s0_dtype = s0.dtype if has_init else None
        return y, final

    @staticmethod
    def backward(ctx, dy, d_final):
        x, dt, A, B, C, chunks = ctx.saved_tensors
        dx, ddt, dA, dB, dC, ds0 = ssd_chunk_bwd(
            x, dt, A, B, C, chunks, dy, d_final, chunk_size=ctx.chunk_size, has_init=ctx.has_init
        )
        if ds0 is not None:
            ds0 = ds0.to(ctx.s0_dtype)
        return dx, ddt, dA, dB, dC, ds0, None, None


def ssd_chunk(
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
    """Mamba-2 SSD over a sequence with the chunkwise Triton kernels (same meaning as :func:`tsfm.kernels.ops.ssd`).

    Args:
        x: ``[B, T, H, P]`` inputs (the values; bf16, fp16 or fp32).
        dt: ``[B, T, H]`` positive step sizes (already softplus'd).
        A: ``[H]`` positive decay rates (``exp(A_log)``).
        B: ``[B, T, H, N]`` input projections (the keys).
        C: ``[B, T, H, N]`` output projections (the queries).
        initial_state: ``S [B, H, N, P]`` to continue from, or ``None`` for zeros.
        output_final_state: also return the float32 state after the last token.
        chunk_size: tokens per chunk (rounded to a power of two in ``[16, 128]``, at most 32 when ``N`` or ``P``
            exceeds 64; the result does not depend on it).

    Returns:
        ``y [B, T, H, P]`` in the dtype of ``x`` and the final float32 state ``[B, H, N, P]`` or ``None``.

    Example:
        >>> x = torch.randn(2, 100, 4, 64, device="cuda"); dt = torch.rand(2, 100, 4, device="cuda")
        >>> A = torch.ones(4, device="cuda"); B = C = torch.randn(2, 100, 4, 64, device="cuda")
        >>> y, S = ssd_chunk(x, dt, A, B, C, output_final_state=True)
    """
    y, final = SSDChunkFunction.apply(x, dt, A, B, C, initial_state, chunk_size, output_final_state)
    return y, final
