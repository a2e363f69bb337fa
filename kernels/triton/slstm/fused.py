"""sLSTM fused recurrent Triton kernels: forward, backward and the autograd function that calls them.

The math is that of :func:`kernels.reference.slstm.slstm_step` (the definition)::

    (ĩ, f̃, z̃, õ) = x_gates_t + h_{t-1} @ R[h, gate]
    m_t = max(ĩ, logsig(f̃) + m_{t-1}),  i' = exp(ĩ - m_t),  f' = exp(logsig(f̃) + m_{t-1} - m_t)
    c_t = f' c_{t-1} + i' tanh(z̃),  n_t = f' n_{t-1} + i',  h_t = sigmoid(õ) c_t / n_t

It is strictly sequential, so each program owns a block of ``BB`` batch rows of one head and walks all ``T`` steps
with the four recurrent matrices ``R[h, g]`` and the state ``(h, c, n, m)`` on chip: one launch for the whole
sequence (forward) and one for the backward, instead of one per step. Heads wider than ``R_ON_CHIP_MAX`` (64) keep
the state on chip but read ``R`` from L2 at every step (``R_STREAM``): four float32 128 x 128 tiles do not fit in
shared memory.

* ``_slstm_fwd_kernel``: writes ``h_t`` (dtype of ``x_gates``), the final state and, for the backward, the float32
  states ``h, c, n, m`` of every step.
* ``_slstm_bwd_kernel``: walks the steps in reverse with ``dh, dc, dn`` on chip, recomputes each step's gates from
  the stored ``h_{t-1}`` and writes the gate gradients ``dx_gates`` (which are also the gradients of the
  pre-activations). ``dR = sum_{b,t} h_{t-1}^T dx_gates`` is then one batched matrix product outside the kernel:
  keeping four ``D x D`` float32 accumulators on chip beside ``R`` would not fit the registers.

The stabiliser ``m`` carries no gradient; ``h, c, n`` of the initial state get theirs.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from kernels.triton._common import block, contiguous, dot_precision

SLSTMState = tuple[Tensor, Tensor, Tensor, Tensor]

BB = 16
"""Batch rows per program (``tl.dot`` needs at least 16 rows on GPUs)."""


@triton.jit
def _logsigmoid(x):
    return tl.minimum(x, 0.0) - tl.log(1.0 + tl.exp(-tl.abs(x)))


@triton.jit
def _tanh(x):
    return 2.0 * tl.sigmoid(2.0 * x) - 1.0


@triton.jit
def _load_r(r, r_off, mask_dd, g: tl.constexpr, D: tl.constexpr):
    """The ``D x D`` recurrent matrix of gate ``g`` of this program's head, as float32."""
    return tl.load(r + r_off + g * D * D, mask=mask_dd, other=0.0).to(tl.float32)


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

    for t in range(T):
        row = (o_b[:, None] * T + t) * H + i_h
        x_off = row * 4 * D + o_d[None, :]
        pre_i = tl.load(x + x_off, mask=mask_bd, other=0.0).to(tl.float32)
        pre_f = tl.load(x + x_off + D, mask=mask_bd, other=0.0).to(tl.float32)
        pre_z = tl.load(x + x_off + 2 * D, mask=mask_bd, other=0.0).to(tl.float32)
        pre_o = tl.load(x + x_off + 3 * D, mask=mask_bd, other=0.0).to(tl.float32)
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
    dx, dh0, dc0, dn0,  # gradients of x_gates (float32) and of the initial (h, c, n)
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

    for j in range(T):
        t = T - 1 - j
        row = (o_b[:, None] * T + t) * H + i_h
        h_off = row * D + o_d[None, :]
        if t > 0:
            prev = h_off - H * D
            h_prev = tl.load(hs + prev, mask=mask_bd, other=0.0)
            c_prev = tl.load(cs + prev, mask=mask_bd, other=0.0)
            n_prev = tl.load(ns + prev, mask=mask_bd, other=0.0)
            m_prev = tl.load(ms + prev, mask=mask_bd, other=0.0)
        elif HAS_INIT:
            h_prev = tl.load(h0 + s_off, mask=mask_bd, other=0.0).to(tl.float32)
            c_prev = tl.load(c0 + s_off, mask=mask_bd, other=0.0).to(tl.float32)
            n_prev = tl.load(n0 + s_off, mask=mask_bd, other=0.0).to(tl.float32)
            m_prev = tl.load(m0 + s_off, mask=mask_bd, other=0.0).to(tl.float32)
        else:
            h_prev = tl.zeros([BB, BD], dtype=tl.float32)
            c_prev = tl.zeros([BB, BD], dtype=tl.float32)
            n_prev = tl.zeros([BB, BD], dtype=tl.float32)
            m_prev = tl.full([BB, BD], float("-inf"), dtype=tl.float32)
        c_t = tl.load(cs + h_off, mask=mask_bd, other=0.0)
        n_t = tl.load(ns + h_off, mask=mask_bd, other=1.0)
        m_t = tl.load(ms + h_off, mask=mask_bd, other=0.0)

        x_off = row * 4 * D + o_d[None, :]
        pre_i = tl.load(x + x_off, mask=mask_bd, other=0.0).to(tl.float32)
        pre_f = tl.load(x + x_off + D, mask=mask_bd, other=0.0).to(tl.float32)
        pre_z = tl.load(x + x_off + 2 * D, mask=mask_bd, other=0.0).to(tl.float32)
        pre_o = tl.load(x + x_off + 3 * D, mask=mask_bd, other=0.0).to(tl.float32)
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

        dh += tl.load(dout + h_off, mask=mask_bd, other=0.0).to(tl.float32)
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

        tl.store(dx + x_off, d_i, mask=mask_bd)
        tl.store(dx + x_off + D, d_f, mask=mask_bd)
        tl.store(dx + x_off + 2 * D, d_z, mask=mask_bd)
        tl.store(dx + x_off + 3 * D, d_o, mask=mask_bd)

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

    if HAS_INIT:
        tl.store(dh0 + s_off, dh, mask=mask_bd)
        tl.store(dc0 + s_off, dc, mask=mask_bd)
        tl.store(dn0 + s_off, dn, mask=mask_bd)


def _num_warps(bd: int) -> int:
    return 8 if bd >= 128 else 4


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
    """Forward stage: ``h [B, T, H, D]``, the final state (if asked) and every step's float32 state (if asked).

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
    init = contiguous(*(s.float() for s in initial_state)) if has_init else [out] * 4
    final = (
        tuple(torch.empty(batch, heads, dim, device=dev, dtype=f32) for _ in range(4)) if output_final_state else None
    )
    states = (
        tuple(torch.empty(batch, length, heads, dim, device=dev, dtype=f32) for _ in range(4)) if store_states else None
    )
    grid = (triton.cdiv(batch, BB), heads)
    _slstm_fwd_kernel[grid](
        x_gates, R, *init, out, *(final or (out,) * 4), *(states or (out,) * 4),
        batch, length,
        H=heads, D=dim, BB=BB, BD=bd,
        HAS_INIT=has_init, STORE_FINAL=output_final_state, STORE_STATES=store_states,
        PRECISION=dot_precision(x_gates.dtype), R_STREAM=bd > R_ON_CHIP_MAX, num_warps=_num_warps(bd), num_stages=1,
    )  # fmt: skip
    return out, final, states


def slstm_fused_bwd(
    x_gates: Tensor,
    R: Tensor,
    initial_state: SLSTMState | None,
    states: SLSTMState,
    dout: Tensor,
    d_final: tuple[Tensor | None, Tensor | None, Tensor | None],
) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor, Tensor] | None]:
    """Backward stage: gradients of ``x_gates`` and ``R``, and of the initial ``(h, c, n)`` (``None`` without one).

    Args:
        x_gates, R: the forward inputs (contiguous).
        initial_state: the forward's initial state (float32) or ``None``.
        states: every step's ``(h, c, n, m)`` from :func:`slstm_fused_fwd` with ``store_states=True``.
        dout: ``[B, T, H, D]`` gradient of the output.
        d_final: gradients of the final ``(h, c, n)``; ``None`` entries are zeros.
    """
    batch, length, heads, _, dim = x_gates.shape
    dev, f32 = x_gates.device, torch.float32
    bd = block(dim)
    dx = torch.empty(x_gates.shape, device=dev, dtype=f32)
    has_init = initial_state is not None
    has_dfinal = any(d is not None for d in d_final)
    zeros = torch.zeros(batch, heads, dim, device=dev, dtype=f32)
    dfinal = [zeros if d is None else d.float().contiguous() for d in d_final] if has_dfinal else [dx] * 3
    dinit = tuple(torch.empty(batch, heads, dim, device=dev, dtype=f32) for _ in range(3)) if has_init else None
    init = initial_state if has_init else (dx,) * 4
    grid = (triton.cdiv(batch, BB), heads)
    _slstm_bwd_kernel[grid](
        x_gates, R, *init, *states, dout.contiguous(), *dfinal, dx, *(dinit or (dx,) * 3),
        batch, length,
        H=heads, D=dim, BB=BB, BD=bd,
        HAS_INIT=has_init, HAS_DFINAL=has_dfinal,
        PRECISION=dot_precision(x_gates.dtype), R_STREAM=bd > R_ON_CHIP_MAX, num_warps=_num_warps(bd), num_stages=1,
    )  # fmt: skip
    # dR[h, g] = sum_{b, t} h_{t-1}^T dx_gates[g]: one batched product over all steps.
    h_first = initial_state[0][:, None] if has_init else torch.zeros(batch, 1, heads, dim, device=dev, dtype=f32)
    h_prev = torch.cat([h_first, states[0][:, :-1]], dim=1)
    dR = torch.einsum("bthd,bthge->hgde", h_prev, dx)
    return dx.to(x_gates.dtype), dR.to(R.dtype), dinit


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
    """The sLSTM over a sequence with the fused recurrent Triton kernels (same meaning as :func:`kernels.ops.slstm`).

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
