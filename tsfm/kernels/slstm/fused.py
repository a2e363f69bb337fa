"""sLSTM fused recurrent Triton kernels: forward, backward and the autograd function that calls them.

The math is that of :func:`tsfm.kernels.slstm.reference.slstm_step` (the definition)::

    (ĩ, f̃, z̃, õ) = x_gates_t + h_{t-1} @ R[h, gate]
    m_t = max(ĩ, logsig(f̃) + m_{t-1}),  i' = exp(ĩ - m_t),  f' = exp(logsig(f̃) + m_{t-1} - m_t)
    c_t = f' c_{t-1} + i' tanh(z̃),  n_t = f' n_{t-1} + i',  h_t = sigmoid(õ) c_t / n_t

It is strictly sequential, so each program owns a block of ``BB`` batch rows of one head and walks all ``T`` steps
with the four recurrent matrices ``R[h, g]`` and the state ``(h, c, n, m)`` on chip: one launch for the whole
sequence (forward) and one for the backward, instead of one per step. Heads wider than ``R_ON_CHIP_MAX`` (64) keep
the state on chip but read ``R`` from L2 at every step (``R_STREAM``): four float32 128 x 128 tiles do not fit in
shared memory.

Forward: :func:`slstm_fused_fwd`; backward: :func:`_recurrent_bwd` then :func:`_recurrent_weights_grad`.

* ``_slstm_fwd_kernel``: writes ``h_t`` (dtype of ``x_gates``), the final state and, for the backward, the float32
  states ``h, c, n, m`` of every step.
* ``_slstm_bwd_kernel``: walks the steps in reverse with ``dh, dc, dn`` on chip, recomputes each step's gates from
  the stored ``h_{t-1}`` and writes the gate gradients ``dx_gates`` (which are also the gradients of the
  pre-activations) in the dtype of ``x_gates``.
* ``_slstm_dr_kernel``: ``dR = sum_{b,t} h_{t-1}^T dx_gates``, split over slices of the ``B * T`` rows (bf16
  products for bf16 inputs), the partial sums added by the caller. Keeping four ``D x D`` float32 accumulators on
  chip beside ``R`` in the backward would not fit the registers.

Both recurrent kernels load a step's inputs (gates, output gradient, stored state) one step ahead, so their memory
latency overlaps the previous step's work: a step of a small batch takes a few microseconds, mostly latency.

The stabiliser ``m`` carries no gradient; ``h, c, n`` of the initial state get theirs.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from tsfm.kernels._triton_common import block, contiguous, dot_precision
from tsfm.kernels._triton_common import logsigmoid as _logsigmoid

SLSTMState = tuple[Tensor, Tensor, Tensor, Tensor]

BB = 16
"""Batch rows per program (``tl.dot`` needs at least 16 rows on GPUs)."""


@triton.jit
def _tanh(x):
    return 2.0 * tl.sigmoid(2.0 * x) - 1.0


@triton.jit
def _load_r(r, r_off, mask_dd, g: tl.constexpr, D: tl.constexpr):
    """The ``D x D`` recurrent matrix of gate ``g`` of this program's head, as float32."""
    return tl.load(r + r_off + g * D * D, mask=mask_dd, other=0.0).to(tl.float32)


@triton.jit
def _load_gates(x, o_b, o_d, t, T, H: tl.constexpr, D: tl.constexpr, i_h, mask):
    """The four gate inputs ``(i, f, z, o)`` of step ``t`` for this program's batch rows, as float32."""
    x_off = ((o_b[:, None] * T + t) * H + i_h) * 4 * D + o_d[None, :]
    pre_i = tl.load(x + x_off, mask=mask, other=0.0).to(tl.float32)
    pre_f = tl.load(x + x_off + D, mask=mask, other=0.0).to(tl.float32)
    pre_z = tl.load(x + x_off + 2 * D, mask=mask, other=0.0).to(tl.float32)
    pre_o = tl.load(x + x_off + 3 * D, mask=mask, other=0.0).to(tl.float32)
    return pre_i, pre_f, pre_z, pre_o


@triton.jit
def _load_prev_state(hs, cs, ns, ms, h0, c0, n0, m0, o_b, o_d, t, T, H: tl.constexpr, D: tl.constexpr, i_h, mask,
                     HAS_INIT: tl.constexpr):  # fmt: skip
    """``(h, c, n, m)`` before step ``t``: the stored state of step ``t - 1``, the initial state at ``t = 0``.

    Lanes outside ``mask`` (padding rows and columns) read ``n = 1`` and finite ``m``, so that ``c / n`` and the
    gate exponentials stay finite there: a NaN in a padding lane would reach real lanes through ``tl.dot``.
    """
    prev = ((o_b[:, None] * T + t - 1) * H + i_h) * D + o_d[None, :]
    stored = mask & (t > 0)
    h_prev = tl.load(hs + prev, mask=stored, other=0.0)
    c_prev = tl.load(cs + prev, mask=stored, other=0.0)
    n_prev = tl.load(ns + prev, mask=stored, other=1.0)
    m_prev = tl.load(ms + prev, mask=stored, other=0.0)
    if HAS_INIT:
        s_off = (o_b[:, None] * H + i_h) * D + o_d[None, :]
        first = mask & (t == 0)
        h_prev = tl.where(first, tl.load(h0 + s_off, mask=first, other=0.0).to(tl.float32), h_prev)
        c_prev = tl.where(first, tl.load(c0 + s_off, mask=first, other=0.0).to(tl.float32), c_prev)
        n_prev = tl.where(first, tl.load(n0 + s_off, mask=first, other=1.0).to(tl.float32), n_prev)
        m_prev = tl.where(first, tl.load(m0 + s_off, mask=first, other=0.0).to(tl.float32), m_prev)
    else:  # the fresh state: m = -inf makes the forget gate of the first step 0, whatever h, c, n hold
        m_prev = tl.where(t == 0, float("-inf"), m_prev)
    return h_prev, c_prev, n_prev, m_prev


@triton.jit
def _slstm_fwd_kernel(
    x, r, h0, c0, n0, m0,  # x_gates [B, T, H, 4, D], R [H, 4, D, D], initial state [B, H, D] each
    out, ht, ct, nt, mt,  # output [B, T, H, D], final state
    hs, cs, ns, ms,  # float32 states of every step [B, T, H, D] (for the backward)
    B, T,
    H: tl.constexpr, D: tl.constexpr, BB: tl.constexpr, BD: tl.constexpr,
    HAS_INIT: tl.constexpr, STORE_FINAL: tl.constexpr, STORE_STATES: tl.constexpr, PRECISION: tl.constexpr,
    R_STREAM: tl.constexpr,
):  # fmt: skip
    i_b = tl.program_id(0)
    i_h = tl.program_id(1)
    o_b = i_b * BB + tl.arange(0, BB)
    o_d = tl.arange(0, BD)
    mask_b = o_b < B
    mask_d = o_d < D
    mask_bd = mask_b[:, None] & mask_d[None, :]
    mask_dd = mask_d[:, None] & mask_d[None, :]
    r_off = i_h * 4 * D * D + o_d[:, None] * D + o_d[None, :]
    if not R_STREAM:  # R stays on chip for the whole sequence
        r_i = _load_r(r, r_off, mask_dd, 0, D)
        r_f = _load_r(r, r_off, mask_dd, 1, D)
        r_z = _load_r(r, r_off, mask_dd, 2, D)
        r_o = _load_r(r, r_off, mask_dd, 3, D)

    s_off = (o_b[:, None] * H + i_h) * D + o_d[None, :]
    if HAS_INIT:
        h = tl.load(h0 + s_off, mask=mask_bd, other=0.0).to(tl.float32)
        c = tl.load(c0 + s_off, mask=mask_bd, other=0.0).to(tl.float32)
        n = tl.load(n0 + s_off, mask=mask_bd, other=0.0).to(tl.float32)
        m = tl.load(m0 + s_off, mask=mask_bd, other=0.0).to(tl.float32)
    else:
        h = tl.zeros([BB, BD], dtype=tl.float32)
        c = tl.zeros([BB, BD], dtype=tl.float32)
        n = tl.zeros([BB, BD], dtype=tl.float32)
        m = tl.full([BB, BD], float("-inf"), dtype=tl.float32)

    # The gate inputs do not depend on the recurrence: each step loads the next step's while it computes this one,
    # so their memory latency is off the serial path (one step of a small batch takes only a few microseconds).
    nxt_i, nxt_f, nxt_z, nxt_o = _load_gates(x, o_b, o_d, 0, T, H, D, i_h, mask_bd)
    for t in range(T):
        row = (o_b[:, None] * T + t) * H + i_h
        pre_i, pre_f, pre_z, pre_o = nxt_i, nxt_f, nxt_z, nxt_o
        nxt_i, nxt_f, nxt_z, nxt_o = _load_gates(x, o_b, o_d, t + 1, T, H, D, i_h, mask_bd & (t + 1 < T))
        if R_STREAM:  # too wide for shared memory: read each gate's R from L2 at every step
            pre_i += tl.dot(h, _load_r(r, r_off, mask_dd, 0, D), input_precision=PRECISION)
            pre_f += tl.dot(h, _load_r(r, r_off, mask_dd, 1, D), input_precision=PRECISION)
            pre_z += tl.dot(h, _load_r(r, r_off, mask_dd, 2, D), input_precision=PRECISION)
            pre_o += tl.dot(h, _load_r(r, r_off, mask_dd, 3, D), input_precision=PRECISION)
        else:
            pre_i += tl.dot(h, r_i, input_precision=PRECISION)
            pre_f += tl.dot(h, r_f, input_precision=PRECISION)
            pre_z += tl.dot(h, r_z, input_precision=PRECISION)
            pre_o += tl.dot(h, r_o, input_precision=PRECISION)

        logf = _logsigmoid(pre_f)
        m_new = tl.maximum(pre_i, logf + m)
        i_gate = tl.exp(pre_i - m_new)
        f_gate = tl.exp(logf + m - m_new)
        c = f_gate * c + i_gate * _tanh(pre_z)
        n = f_gate * n + i_gate
        h = tl.sigmoid(pre_o) * c / n
        m = m_new

        h_off = row * D + o_d[None, :]
        tl.store(out + h_off, h.to(out.dtype.element_ty), mask=mask_bd)
        if STORE_STATES:
            tl.store(hs + h_off, h, mask=mask_bd)
            tl.store(cs + h_off, c, mask=mask_bd)
            tl.store(ns + h_off, n, mask=mask_bd)
            tl.store(ms + h_off, m, mask=mask_bd)

    if STORE_FINAL:
        tl.store(ht + s_off, h, mask=mask_bd)
        tl.store(ct + s_off, c, mask=mask_bd)
        tl.store(nt + s_off, n, mask=mask_bd)
        tl.store(mt + s_off, m, mask=mask_bd)


@triton.jit
def _slstm_bwd_kernel(
    x, r, h0, c0, n0, m0, hs, cs, ns, ms,  # forward inputs, initial state, stored states
    dout, dht, dct, dnt,  # gradients of the output and of the final (h, c, n)
    dx, dh0, dc0, dn0,  # gradients of x_gates (dtype of x_gates) and of the initial (h, c, n)
    B, T,
    H: tl.constexpr, D: tl.constexpr, BB: tl.constexpr, BD: tl.constexpr,
    HAS_INIT: tl.constexpr, HAS_DFINAL: tl.constexpr, PRECISION: tl.constexpr, R_STREAM: tl.constexpr,
):  # fmt: skip
    i_b = tl.program_id(0)
    i_h = tl.program_id(1)
    o_b = i_b * BB + tl.arange(0, BB)
    o_d = tl.arange(0, BD)
    mask_b = o_b < B
    mask_d = o_d < D
    mask_bd = mask_b[:, None] & mask_d[None, :]
    mask_dd = mask_d[:, None] & mask_d[None, :]
    r_off = i_h * 4 * D * D + o_d[:, None] * D + o_d[None, :]
    if not R_STREAM:  # R stays on chip for the whole sequence
        r_i = _load_r(r, r_off, mask_dd, 0, D)
        r_f = _load_r(r, r_off, mask_dd, 1, D)
        r_z = _load_r(r, r_off, mask_dd, 2, D)
        r_o = _load_r(r, r_off, mask_dd, 3, D)

    s_off = (o_b[:, None] * H + i_h) * D + o_d[None, :]
    if HAS_DFINAL:
        dh = tl.load(dht + s_off, mask=mask_bd, other=0.0).to(tl.float32)
        dc = tl.load(dct + s_off, mask=mask_bd, other=0.0).to(tl.float32)
        dn = tl.load(dnt + s_off, mask=mask_bd, other=0.0).to(tl.float32)
    else:
        dh = tl.zeros([BB, BD], dtype=tl.float32)
        dc = tl.zeros([BB, BD], dtype=tl.float32)
        dn = tl.zeros([BB, BD], dtype=tl.float32)

    # Everything a step reads except the recurrence itself (its gate inputs, the output gradient and the stored
    # state before it) is loaded one step ahead, off the serial path; the state after a step is the state before
    # the step walked just before it, carried over instead of loaded again.
    t_last = T - 1
    _, c_t, n_t, m_t = _load_prev_state(hs, cs, ns, ms, h0, c0, n0, m0, o_b, o_d, T, T, H, D, i_h, mask_bd, False)
    nxt_x = _load_gates(x, o_b, o_d, t_last, T, H, D, i_h, mask_bd)
    nxt_prev = _load_prev_state(hs, cs, ns, ms, h0, c0, n0, m0, o_b, o_d, t_last, T, H, D, i_h, mask_bd, HAS_INIT)
    nxt_dout = tl.load(dout + ((o_b[:, None] * T + t_last) * H + i_h) * D + o_d[None, :], mask=mask_bd, other=0.0)
    for j in range(T):
        t = T - 1 - j
        row = (o_b[:, None] * T + t) * H + i_h
        h_off = row * D + o_d[None, :]
        x_off = row * 4 * D + o_d[None, :]
        pre_i, pre_f, pre_z, pre_o = nxt_x
        h_prev, c_prev, n_prev, m_prev = nxt_prev
        b_dout = nxt_dout
        ahead = mask_bd & (t > 0)
        nxt_x = _load_gates(x, o_b, o_d, t - 1, T, H, D, i_h, ahead)
        nxt_prev = _load_prev_state(hs, cs, ns, ms, h0, c0, n0, m0, o_b, o_d, t - 1, T, H, D, i_h, ahead, HAS_INIT)
        nxt_dout = tl.load(dout + h_off - H * D, mask=ahead, other=0.0)
        if R_STREAM:
            pre_i += tl.dot(h_prev, _load_r(r, r_off, mask_dd, 0, D), input_precision=PRECISION)
            pre_f += tl.dot(h_prev, _load_r(r, r_off, mask_dd, 1, D), input_precision=PRECISION)
            pre_z += tl.dot(h_prev, _load_r(r, r_off, mask_dd, 2, D), input_precision=PRECISION)
            pre_o += tl.dot(h_prev, _load_r(r, r_off, mask_dd, 3, D), input_precision=PRECISION)
        else:
            pre_i += tl.dot(h_prev, r_i, input_precision=PRECISION)
            pre_f += tl.dot(h_prev, r_f, input_precision=PRECISION)
            pre_z += tl.dot(h_prev, r_z, input_precision=PRECISION)
            pre_o += tl.dot(h_prev, r_o, input_precision=PRECISION)

        dh += b_dout.to(tl.float32)
        o_gate = tl.sigmoid(pre_o)
        d_o = dh * (c_t / n_t) * o_gate * (1.0 - o_gate)
        dc += dh * o_gate / n_t
        dn -= dh * o_gate * c_t / (n_t * n_t)
        i_gate = tl.exp(pre_i - m_t)
        f_gate = tl.exp(_logsigmoid(pre_f) + m_prev - m_t)
        tz = _tanh(pre_z)
        d_i = (dc * tz + dn) * i_gate
        d_z = dc * i_gate * (1.0 - tz * tz)
        d_f = (dc * c_prev + dn * n_prev) * f_gate * tl.sigmoid(-pre_f)

        tl.store(dx + x_off, d_i.to(dx.dtype.element_ty), mask=mask_bd)
        tl.store(dx + x_off + D, d_f.to(dx.dtype.element_ty), mask=mask_bd)
        tl.store(dx + x_off + 2 * D, d_z.to(dx.dtype.element_ty), mask=mask_bd)
        tl.store(dx + x_off + 3 * D, d_o.to(dx.dtype.element_ty), mask=mask_bd)

        if R_STREAM:
            dh = tl.dot(d_i, tl.trans(_load_r(r, r_off, mask_dd, 0, D)), input_precision=PRECISION)
            dh += tl.dot(d_f, tl.trans(_load_r(r, r_off, mask_dd, 1, D)), input_precision=PRECISION)
            dh += tl.dot(d_z, tl.trans(_load_r(r, r_off, mask_dd, 2, D)), input_precision=PRECISION)
            dh += tl.dot(d_o, tl.trans(_load_r(r, r_off, mask_dd, 3, D)), input_precision=PRECISION)
        else:
            dh = tl.dot(d_i, tl.trans(r_i), input_precision=PRECISION)
            dh += tl.dot(d_f, tl.trans(r_f), input_precision=PRECISION)
            dh += tl.dot(d_z, tl.trans(r_z), input_precision=PRECISION)
            dh += tl.dot(d_o, tl.trans(r_o), input_precision=PRECISION)
        dc = dc * f_gate
        dn = dn * f_gate
        c_t, n_t, m_t = c_prev, n_prev, m_prev

    if HAS_INIT:
        tl.store(dh0 + s_off, dh, mask=mask_bd)
        tl.store(dc0 + s_off, dc, mask=mask_bd)
        tl.store(dn0 + s_off, dn, mask=mask_bd)


@triton.jit
def _slstm_dr_kernel(
    hs, h0, dx, dr,  # stored h [B, T, H, D] (f32), initial h [B, H, D], dx_gates [B, T, H, 4, D], dR [S, H, 4, D, D]
    B, T, ROWS,
    H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, BR: tl.constexpr,
    HAS_INIT: tl.constexpr, DOT_BF16: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """``dR[h, g] = sum_rows h_{t-1}^T dx_gates[g]`` over one slice of ``ROWS`` rows ``(b, t)``, for one (head, gate).

    The reduction runs over all ``B * T`` rows; one matrix product with a reduction that long keeps a few programs
    busy for milliseconds, so the rows are split into slices, each program writes its slice's partial sum, and the
    caller adds them. ``h_{t-1}`` is read from the forward's stored states (the initial state at ``t = 0``), never
    materialised.
    """
    i_s = tl.program_id(0)
    i_h = tl.program_id(1) // 4
    g = tl.program_id(1) % 4
    o_d = tl.arange(0, BD)
    mask_d = o_d < D
    acc = tl.zeros([BD, BD], dtype=tl.float32)
    for r0 in range(0, ROWS, BR):
        o_r = i_s * ROWS + r0 + tl.arange(0, BR)
        mask_r = o_r < B * T  # ROWS is a multiple of BR: only the last slice is ragged
        t = o_r % T
        stored = (mask_r & (t > 0))[:, None] & mask_d[None, :]
        h_prev = tl.load(hs + ((o_r[:, None] - 1) * H + i_h) * D + o_d[None, :], mask=stored, other=0.0)
        if HAS_INIT:
            first = (mask_r & (t == 0))[:, None] & mask_d[None, :]
            b_off = ((o_r // T)[:, None] * H + i_h) * D + o_d[None, :]
            h_prev += tl.load(h0 + b_off, mask=first, other=0.0).to(tl.float32)
        mask_rd = mask_r[:, None] & mask_d[None, :]
        d_gate = tl.load(dx + (o_r[:, None] * H + i_h) * 4 * D + g * D + o_d[None, :], mask=mask_rd, other=0.0)
        if DOT_BF16:
            acc += tl.dot(tl.trans(h_prev.to(tl.bfloat16)), d_gate.to(tl.bfloat16))
        else:
            acc += tl.dot(tl.trans(h_prev), d_gate.to(tl.float32), input_precision=PRECISION)
    out = ((i_s * H + i_h) * 4 + g) * D * D + o_d[:, None] * D + o_d[None, :]
    tl.store(dr + out, acc, mask=mask_d[:, None] & mask_d[None, :])


def _dr_slices(rows: int, heads: int, row_block: int) -> tuple[int, int]:
    """``(slices, rows per slice)`` for :func:`_slstm_dr_kernel`: about 4 programs per SM of an H200 (132 SMs) over
    the ``4 * heads`` (head, gate) pairs, and no slice shorter than 4 row blocks."""
    slices = max(1, min(triton.cdiv(4 * 132, 4 * heads), rows // (4 * row_block)))
    per_slice = triton.cdiv(triton.cdiv(rows, slices), row_block) * row_block
    return triton.cdiv(rows, per_slice), per_slice


def _num_warps(bd: int) -> int:
    """Warps per program: 8 from 64-wide heads on (no spills in the backward on sm_90)."""
    return 8 if bd >= 64 else 4


R_ON_CHIP_MAX = 64
"""Widest head whose four float32 ``R`` tiles stay on chip for the whole sequence (4 x 64 x 64 x 4 B = 64 KB); wider
heads (128: 256 KB, over sm_90's 227 KB of shared memory) read ``R`` from L2 at every step instead."""


def slstm_fused_fwd(
    x_gates: Tensor,
    R: Tensor,
    *,
    initial_state: SLSTMState | None,
    output_final_state: bool,
    store_states: bool,
) -> tuple[Tensor, SLSTMState | None, SLSTMState | None]:
    """Forward, one launch over the whole sequence: ``h [B, T, H, D]``, the final state (if asked) and every step's
    float32 state (if asked).

    Args:
        x_gates: ``[B, T, H, 4, D]`` (contiguous); R: ``[H, 4, D, D]`` (contiguous).
        initial_state: ``(h, c, n, m)`` each ``[B, H, D]``, or ``None`` for the fresh state.
        output_final_state: write the state after the last step.
        store_states: keep ``(h, c, n, m)`` of every step, ``[B, T, H, D]`` float32 each, for the backward.
    """
    batch, length, heads, _, dim = x_gates.shape
    dev, f32 = x_gates.device, torch.float32
    bd = block(dim)
    out = torch.empty(batch, length, heads, dim, device=dev, dtype=x_gates.dtype)
    has_init = initial_state is not None
    h0, c0, n0, m0 = contiguous(*(s.float() for s in initial_state)) if has_init else [out] * 4
    final = (
        tuple(torch.empty(batch, heads, dim, device=dev, dtype=f32) for _ in range(4)) if output_final_state else None
    )
    states = (
        tuple(torch.empty(batch, length, heads, dim, device=dev, dtype=f32) for _ in range(4)) if store_states else None
    )
    ht, ct, nt, mt = final or (out,) * 4
    hs, cs, ns, ms = states or (out,) * 4
    _slstm_fwd_kernel[(triton.cdiv(batch, BB), heads)](
        x=x_gates, r=R, h0=h0, c0=c0, n0=n0, m0=m0,
        out=out, ht=ht, ct=ct, nt=nt, mt=mt, hs=hs, cs=cs, ns=ns, ms=ms,
        B=batch, T=length, H=heads, D=dim, BB=BB, BD=bd,
        HAS_INIT=has_init, STORE_FINAL=output_final_state, STORE_STATES=store_states,
        PRECISION=dot_precision(x_gates.dtype), R_STREAM=bd > R_ON_CHIP_MAX, num_warps=_num_warps(bd), num_stages=1,
    )  # fmt: skip
    return out, final, states


def _recurrent_bwd(
    *, x_gates: Tensor, R: Tensor, initial_state: SLSTMState | None, states: SLSTMState, dout: Tensor,
    d_final: tuple[Tensor, Tensor, Tensor] | None,
) -> tuple[Tensor, tuple[Tensor, Tensor, Tensor] | None]:  # fmt: skip
    """Backward stage 1, the steps in reverse: the gate gradients ``dx_gates`` (dtype of ``x_gates``) and the
    initial ``(h, c, n)``'s gradient (``None`` without an initial state)."""
    batch, length, heads, _, dim = x_gates.shape
    dev, f32 = x_gates.device, torch.float32
    bd = block(dim)
    dx = torch.empty(x_gates.shape, device=dev, dtype=x_gates.dtype)
    has_init = initial_state is not None
    dinit = tuple(torch.empty(batch, heads, dim, device=dev, dtype=f32) for _ in range(3)) if has_init else None
    h0, c0, n0, m0 = initial_state if has_init else (dx,) * 4
    dht, dct, dnt = d_final or (dx,) * 3
    dh0, dc0, dn0 = dinit or (dx,) * 3
    _slstm_bwd_kernel[(triton.cdiv(batch, BB), heads)](
        x=x_gates, r=R, h0=h0, c0=c0, n0=n0, m0=m0, hs=states[0], cs=states[1], ns=states[2], ms=states[3],
        dout=dout, dht=dht, dct=dct, dnt=dnt, dx=dx, dh0=dh0, dc0=dc0, dn0=dn0,
        B=batch, T=length, H=heads, D=dim, BB=BB, BD=bd,
        HAS_INIT=has_init, HAS_DFINAL=d_final is not None,
        PRECISION=dot_precision(x_gates.dtype), R_STREAM=bd > R_ON_CHIP_MAX, num_warps=_num_warps(bd), num_stages=1,
    )  # fmt: skip
    return dx, dinit


def _recurrent_weights_grad(*, hs: Tensor, h0: Tensor | None, dx: Tensor, R: Tensor) -> Tensor:
    """Backward stage 2: ``dR[h, g] = sum_{b, t} h_{t-1}^T dx_gates[g]``, split over slices of rows and summed here;
    ``hs`` holds every step's ``h`` and ``h0`` the initial one (``None``: zeros)."""
    batch, length, heads, _, dim = dx.shape
    row_block = 64
    slices, per_slice = _dr_slices(batch * length, heads, row_block)
    partial = torch.empty(slices, heads, 4, dim, dim, device=dx.device, dtype=torch.float32)
    _slstm_dr_kernel[(slices, 4 * heads)](
        hs=hs, h0=hs if h0 is None else h0, dx=dx, dr=partial,
        B=batch, T=length, ROWS=per_slice, H=heads, D=dim, BD=block(dim), BR=row_block,
        HAS_INIT=h0 is not None, DOT_BF16=dx.dtype != torch.float32, PRECISION=dot_precision(dx.dtype),
        num_warps=_num_warps(block(dim)), num_stages=2,
    )  # fmt: skip
    return partial.sum(0).to(R.dtype)


def slstm_fused_bwd(
    x_gates: Tensor,
    R: Tensor,
    initial_state: SLSTMState | None,
    states: SLSTMState,
    dout: Tensor,
    d_final: tuple[Tensor | None, Tensor | None, Tensor | None],
) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor, Tensor] | None]:
    """Backward: gradients of ``x_gates`` and ``R``, and of the initial ``(h, c, n)`` (``None`` without one).

    Args:
        x_gates, R: the forward inputs (contiguous).
        initial_state: the forward's initial state (float32) or ``None``.
        states: every step's ``(h, c, n, m)`` from :func:`slstm_fused_fwd` with ``store_states=True``.
        dout: ``[B, T, H, D]`` gradient of the output.
        d_final: gradients of the final ``(h, c, n)``; ``None`` entries are zeros.
    """
    if all(d is None for d in d_final):
        d_final_f32 = None
    else:
        batch, _, heads, dim = states[0].shape
        zeros = torch.zeros(batch, heads, dim, device=dout.device, dtype=torch.float32)
        d_final_f32 = tuple(zeros if d is None else d.float().contiguous() for d in d_final)
    dx, dinit = _recurrent_bwd(
        x_gates=x_gates, R=R, initial_state=initial_state, states=states, dout=dout.contiguous(), d_final=d_final_f32
    )
    h0 = initial_state[0] if initial_state is not None else None
    dR = _recurrent_weights_grad(hs=states[0], h0=h0, dx=dx, R=R)
    return dx, dR, dinit


class SLSTMFusedFunction(torch.autograd.Function):
    """Autograd wrapper: :func:`slstm_fused_fwd` forward, :func:`slstm_fused_bwd` backward."""

    @staticmethod
    def forward(ctx, x_gates, R, h0, c0, n0, m0, output_final_state):
        x_gates, R = contiguous(x_gates, R)
        has_init = h0 is not None
        initial_state = tuple(s.float().contiguous() for s in (h0, c0, n0, m0)) if has_init else None
        needs_grad = any(ctx.needs_input_grad[:5])
        out, final, states = slstm_fused_fwd(
            x_gates, R, initial_state=initial_state, output_final_state=output_final_state, store_states=needs_grad
        )
        if needs_grad:
            ctx.save_for_backward(x_gates, R, *states, *(initial_state or ()))
        ctx.has_init = has_init
        ctx.state_dtypes = tuple(s.dtype for s in (h0, c0, n0)) if has_init else None
        if final is None:
            return out, None, None, None, None
        ctx.mark_non_differentiable(final[3])
        return out, *final

    @staticmethod
    def backward(ctx, dout, dht, dct, dnt, _dmt):
        x_gates, R, *rest = ctx.saved_tensors
        states, initial_state = tuple(rest[:4]), (tuple(rest[4:]) if ctx.has_init else None)
        dx, dR, dinit = slstm_fused_bwd(x_gates, R, initial_state, states, dout, (dht, dct, dnt))
        if dinit is None:
            return dx, dR, None, None, None, None, None
        dh0, dc0, dn0 = (d.to(dtype) for d, dtype in zip(dinit, ctx.state_dtypes, strict=True))
        return dx, dR, dh0, dc0, dn0, None, None


def slstm_fused(
    x_gates: Tensor,
    R: Tensor,
    *,
    initial_state: SLSTMState | None = None,
    output_final_state: bool = False,
) -> tuple[Tensor, SLSTMState | None]:
    """The sLSTM over a sequence with the fused recurrent Triton kernels (same meaning as
    :func:`tsfm.kernels.ops.slstm`).

    Args:
        x_gates: ``[B, T, H, 4, D]`` input part of the gate pre-activations, gates ``(i, f, z, o)``.
        R: ``[H, 4, D, D]`` recurrent weights; gate ``g`` of head ``h`` adds ``h_{t-1}[b, h, :] @ R[h, g]``.
        initial_state: ``(h, c, n, m)``, each ``[B, H, D]``, or ``None`` for the fresh state.
        output_final_state: also return the float32 state after the last step.

    Returns:
        ``h [B, T, H, D]`` in the dtype of ``x_gates`` and the final ``(h, c, n, m)`` or ``None``.

    Example:
        >>> x_gates = torch.randn(64, 128, 4, 4, 64, device="cuda"); R = 0.1 * torch.randn(4, 4, 64, 64, device="cuda")
        >>> h, state = slstm_fused(x_gates, R, output_final_state=True)  # h: [64, 128, 4, 64]
    """
    h0, c0, n0, m0 = initial_state if initial_state is not None else (None,) * 4
    out, *final = SLSTMFusedFunction.apply(x_gates, R, h0, c0, n0, m0, output_final_state)
    return out, (tuple(final) if output_final_state else None)
