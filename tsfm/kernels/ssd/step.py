"""Mamba-2 SSD one-token decode on the GPU: a dedicated kernel, state in and state out.

One token is, per head, ``S' = exp(-A dt) S + dt B x^T`` and ``y = S'^T C`` on an ``N x P`` state: no matmul, and
the time is that of reading and writing the state once. The chunkwise forward over ``T = 1`` would do the same
arithmetic but pads the token to a 16-row chunk, runs its ``tl.dot`` s and keeps one program per ``(batch, head)``;
this kernel runs one program per ``(batch, head, P-block)``, loads its ``[N, BP]`` state tile once, updates it,
reduces it against ``C`` for ``y`` and writes it back. Each program reads its tile completely before writing it
and the tiles are disjoint, so the new state may overwrite the old one (``out=state``).

Decode is inference: the kernel has no backward. When a gradient is asked for (grad mode on and an input that
requires one), :func:`ssd_step` runs the differentiable chunkwise kernels over the one token instead, as the gated
DeltaNet step does, so the public op is differentiable everywhere.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from tsfm.kernels._triton_common import block, contiguous
from tsfm.kernels.ssd.chunk import ssd_chunk


@triton.jit
def _ssd_step_kernel(
    x, dt, A, Bm, Cm, s,  # x [B, H, P], dt [B, H], A [H], B/C [B, H, N], state [B, H, N, P]
    y, s_out,  # output [B, H, P], new state [B, H, N, P] (may be s itself)
    H: tl.constexpr, N: tl.constexpr, P: tl.constexpr, BN: tl.constexpr, BP: tl.constexpr,
):  # fmt: skip
    i_bh = tl.program_id(0)
    i_p = tl.program_id(1)
    i_h = i_bh % H
    o_n = tl.arange(0, BN)
    o_p = i_p * BP + tl.arange(0, BP)
    mask_n = o_n < N
    mask_p = o_p < P
    mask_np = mask_n[:, None] & mask_p[None, :]
    tile = i_bh * N * P + o_n[:, None] * P + o_p[None, :]

    S = tl.load(s + tile, mask=mask_np, other=0.0).to(tl.float32)
    b_dt = tl.load(dt + i_bh).to(tl.float32)
    a_h = tl.load(A + i_h).to(tl.float32)
    b_x = tl.load(x + i_bh * P + o_p, mask=mask_p, other=0.0).to(tl.float32)
    b_B = tl.load(Bm + i_bh * N + o_n, mask=mask_n, other=0.0).to(tl.float32)
    b_C = tl.load(Cm + i_bh * N + o_n, mask=mask_n, other=0.0).to(tl.float32)

    S = tl.exp(-a_h * b_dt) * S + (b_dt * b_B)[:, None] * b_x[None, :]
    b_y = tl.sum(S * b_C[:, None], axis=0)
    tl.store(y + i_bh * P + o_p, b_y.to(y.dtype.element_ty), mask=mask_p)
    tl.store(s_out + tile, S, mask=mask_np)


def ssd_step(
    x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, state: Tensor, *, out: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """One SSD token (same meaning as :func:`tsfm.kernels.ops.ssd_step`) with the decode kernel.

    Differentiable only through the chunkwise fallback taken when a gradient is asked for (see the module docstring).

    Args:
        x: ``[B, H, P]`` input (bf16, fp16 or fp32).
        dt: ``[B, H]`` positive step size.
        A: ``[H]`` positive decay rates.
        B: ``[B, H, N]`` input projection.
        C: ``[B, H, N]`` output projection.
        state: ``S [B, H, N, P]``, float32.
        out: where to write the new float32 state (contiguous ``[B, H, N, P]``); may be ``state`` itself for an
            in-place update. ``None`` allocates a new tensor and leaves ``state`` untouched.

    Returns:
        ``y [B, H, P]`` in the dtype of ``x`` and the float32 state after the token.
    """
    batch, heads, p_dim = x.shape
    n_dim = B.shape[-1]
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x, dt, A, B, C, state)):
        if out is not None:
            raise ValueError("ssd_step: out= is for inference; it cannot be combined with inputs that need gradients")
        y, new_state = ssd_chunk(
            x[:, None], dt[:, None], A, B[:, None], C[:, None], initial_state=state, output_final_state=True
        )
        return y[:, 0], new_state
    x, dt, A, B, C = contiguous(x, dt, A, B, C)
    if out is None:
        out = torch.empty(batch, heads, n_dim, p_dim, device=x.device, dtype=torch.float32)
    elif out.shape != (batch, heads, n_dim, p_dim) or out.dtype != torch.float32 or not out.is_contiguous():
        raise ValueError(f"ssd_step: out must be a contiguous float32 [B, H, N, P] tensor, got {tuple(out.shape)}")
    state = state.contiguous()
    y = torch.empty_like(x)
    bn, bp = block(n_dim), min(block(p_dim), 32)  # small P-blocks: more programs to stream the state at low batch
    _ssd_step_kernel[(batch * heads, triton.cdiv(p_dim, bp))](
        x=x, dt=dt, A=A, Bm=B, Cm=C, s=state, y=y, s_out=out,
        H=heads, N=n_dim, P=p_dim, BN=bn, BP=bp, num_warps=4 if bn * bp >= 4096 else 2,
    )  # fmt: skip
    return y, out
