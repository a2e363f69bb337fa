"""The gated delta rule's one-token decode on the GPU: a dedicated kernel, state in and state out (inference only).

Decode is bound by reading and writing the ``K x V`` state per head, so the kernel touches it once: one program
per ``(batch, head, value block)`` loads its ``[K, BV]`` state tile, applies the token and stores it::

    k_S   = S^T k                                          # what the memory returns for k (a [BV] slice)
    S'    = alpha S + k (beta (v - alpha k_S))^T           # = alpha (I - beta k k^T) S + beta k v^T
    o     = S'^T (scale q)

The value columns are independent (every product above reduces over ``K`` only), so splitting ``V`` over programs
needs no communication. The kernel has no backward: it is for streaming inference. When a gradient is asked for
(grad mode on and an input that requires one), :func:`gated_delta_rule_step` runs the differentiable chunkwise
kernels of :mod:`.chunk` over the one token instead (same result, a few more launches).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from tsfm.kernels._triton_common import block, contiguous
from tsfm.kernels.gated_delta_rule.chunk import gated_delta_rule_chunk


@triton.jit
def _gated_delta_rule_step_kernel(
    q, k, v, g, beta, s,  # q, k [B, H, K], v [B, H, V], g, beta [B, H], state [B, H, K, V]
    o, s_new,  # output [B, H, V], new state [B, H, K, V] (float32)
    scale,
    K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
):  # fmt: skip
    i_bh = tl.program_id(0)
    i_v = tl.program_id(1)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    mask_k = o_k < K
    mask_v = o_v < V
    mask_kv = mask_k[:, None] & mask_v[None, :]
    tile = i_bh * K * V + o_k[:, None] * V + o_v[None, :]

    b_s = tl.load(s + tile, mask=mask_kv, other=0.0).to(tl.float32)
    b_q = tl.load(q + i_bh * K + o_k, mask=mask_k, other=0.0).to(tl.float32) * scale
    b_k = tl.load(k + i_bh * K + o_k, mask=mask_k, other=0.0).to(tl.float32)
    b_v = tl.load(v + i_bh * V + o_v, mask=mask_v, other=0.0).to(tl.float32)
    alpha = tl.exp(tl.load(g + i_bh).to(tl.float32))
    b_beta = tl.load(beta + i_bh).to(tl.float32)

    b_ks = tl.sum(b_k[:, None] * b_s, axis=0)
    b_s = alpha * b_s + b_k[:, None] * (b_beta * (b_v - alpha * b_ks))[None, :]
    b_o = tl.sum(b_q[:, None] * b_s, axis=0)
    tl.store(o + i_bh * V + o_v, b_o.to(o.dtype.element_ty), mask=mask_v)
    tl.store(s_new + tile, b_s, mask=mask_kv)


def gated_delta_rule_step(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor, *, scale: float | None = None
) -> tuple[Tensor, Tensor]:
    """One gated-delta-rule token (same meaning as :func:`tsfm.kernels.ops.gated_delta_rule_step`) with the decode
    kernel.

    Differentiable only through the chunkwise fallback taken when a gradient is asked for (see the module docstring).

    Args:
        q: ``[B, H, K]`` query (multiplied by ``scale``).
        k: ``[B, H, K]`` key, expected L2-normalised.
        v: ``[B, H, V]`` value.
        g: ``[B, H]`` log-decay ``<= 0``.
        beta: ``[B, H]`` write strength.
        state: ``S [B, H, K, V]`` (read in float32; not modified).
        scale: multiplies ``q``; defaults to ``K ** -0.5``.

    Returns:
        ``o [B, H, V]`` in the dtype of ``v`` and the float32 state after the token.
    """
    batch, heads, k_dim = q.shape
    v_dim = v.shape[-1]
    scale = k_dim**-0.5 if scale is None else scale
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, g, beta, state)):
        o, new_state = gated_delta_rule_chunk(
            q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None], scale=scale, initial_state=state,
            output_final_state=True,
        )  # fmt: skip
        return o[:, 0], new_state
    q, k, v, g, beta, state = contiguous(q, k, v, g, beta, state)
    bk = block(k_dim)
    # A [BK, BV] float32 tile of at most 32 KB per program; value blocks are halved (down to 16 columns) until there
    # are about 256 programs, so that a small decode batch still reads the states with most of the GPU.
    bv = block(v_dim)
    while bv > 16 and (bk * bv > 8192 or batch * heads * triton.cdiv(v_dim, bv) < 256):
        bv //= 2
    o = torch.empty_like(v)
    new_state = torch.empty(batch, heads, k_dim, v_dim, device=q.device, dtype=torch.float32)
    _gated_delta_rule_step_kernel[(batch * heads, triton.cdiv(v_dim, bv))](
        q=q, k=k, v=v, g=g, beta=beta, s=state, o=o, s_new=new_state, scale=scale,
        K=k_dim, V=v_dim, BK=bk, BV=bv, num_warps=4 if bk * bv <= 4096 else 8,
    )  # fmt: skip
    return o, new_state
