"""The mLSTM chunkwise Triton op: :func:`mlstm_chunk`, its autograd function, and the forward and backward as chains
of named stages.

The math is that of :func:`tsfm.kernels.mlstm.reference.mlstm_chunkwise` (the executable spec; the chunk body is
written out in :mod:`.chunk_common`). Two kernel paths compute it, chosen per call by :func:`use_split`:

* :mod:`.chunk_sequential`: one program per ``(batch, head)`` walks the chunks (many pairs, or one chunk);
* :mod:`.chunk_split`: the state recurrence alone, then every chunk in parallel (long sequences, few pairs).

Both give the same outputs, final state and chunk-start states (to rounding); the tests force each.
"""

from __future__ import annotations

import os

import torch
from torch import Tensor

from tsfm.kernels._triton_common import contiguous
from tsfm.kernels.mlstm.chunk_common import ChunkGrid, MLSTMState
from tsfm.kernels.mlstm.chunk_sequential import sequential_bwd, sequential_fwd
from tsfm.kernels.mlstm.chunk_split import split_bwd, split_fwd

__all__ = ["MLSTMChunkFunction", "MLSTMState", "mlstm_chunk", "mlstm_chunk_bwd", "mlstm_chunk_fwd", "use_split"]

SPLIT_MAX_HEADS = 132
"""The split path is used below this many ``(batch, head)`` pairs (the H200's SM count; see :func:`use_split`)."""

SPLIT_BY_DEFAULT = os.environ.get("TSFM_MLSTM_SPLIT", "1") != "0"
"""Whether ``split=None`` may pick the split path; ``TSFM_MLSTM_SPLIT=0`` keeps every shape on the sequential
kernels (``split=True`` / ``False`` force either)."""


def use_split(batch_heads: int, n_chunks: int) -> bool:
    """Whether to run the split path (parallel over chunks) rather than the sequential one: below
    :data:`SPLIT_MAX_HEADS` ``(batch, head)`` pairs with at least two chunks.

    The sequential kernels run ``batch * heads`` programs, each walking every chunk with the whole ``O(L^2)`` chunk
    body on its critical path; with fewer pairs than SMs most of the GPU idles. The split path pays for its
    parallelism with a round trip of the per-chunk states (and their gradients) through memory.
    """
    return SPLIT_BY_DEFAULT and n_chunks >= 2 and batch_heads < SPLIT_MAX_HEADS


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
    """Forward: ``h``, the final state (if asked) and the chunk-start states (if ``store_chunks``).

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, H, V]``; i, f: ``[B, T, H]`` (contiguous).
        scale: multiplies ``q``.
        initial_state: float32 ``(C [B, H, K, V], n [B, H, K], m [B, H])`` or ``None`` (fresh).
        output_final_state: write the state after the last token.
        chunk_size: requested tokens per chunk (rounded, see :func:`tsfm.kernels.mlstm.chunk_common.chunk_length`).
        store_chunks: keep the state at each chunk start for the backward.
        split: run the split path; ``None`` decides with :func:`use_split`.

    Returns:
        ``h [B, T, H, V]`` (dtype of ``v``), the final state or ``None``, and ``(cs, ns, ms)`` or ``None``.
    """
    grid = ChunkGrid.of(q, v, chunk_size)
    split = use_split(grid.batch_heads, grid.n_chunks) if split is None else split
    has_init = initial_state is not None
    if has_init:
        initial_state = tuple(contiguous(*initial_state))
    else:  # a fresh state: m = -inf; C and n are never read
        m0 = torch.full((grid.batch, grid.heads), float("-inf"), device=q.device, dtype=torch.float32)
        initial_state = (m0, m0, m0)
    h = torch.empty_like(v)
    final = grid.empty_states(q.device, per_chunk=False) if output_final_state else None
    # The split path passes the chunk-start states between its stages even without a backward.
    chunks = grid.empty_states(q.device, per_chunk=True) if store_chunks or split else None
    path = split_fwd if split else sequential_fwd
    path(q=q, k=k, v=v, i=i, f=f, initial_state=initial_state, has_init=has_init, scale=scale, grid=grid, h=h,
         final=final, chunks=chunks)  # fmt: skip
    return h, final, chunks if store_chunks else None


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
    """Backward: gradients of ``q, k, v, i, f`` and of the initial ``(C, n)`` (``None`` without one).

    Args:
        q, k, v, i, f: the forward inputs (contiguous).
        chunks: ``(cs, ns, ms)`` from :func:`mlstm_chunk_fwd` with ``store_chunks=True`` (either path).
        dh: ``[B, T, H, V]`` gradient of the output.
        d_final: gradients of the final ``(C, n)``; ``None`` entries are zeros.
        scale: multiplies ``q``.
        chunk_size: the forward's requested chunk size.
        has_init: whether the forward had an initial state (then its gradient is returned).
        split: run the split path; ``None`` decides with :func:`use_split`.
    """
    grid = ChunkGrid.of(q, v, chunk_size)
    split = use_split(grid.batch_heads, grid.n_chunks) if split is None else split
    grads = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), torch.empty_like(i), torch.empty_like(f))
    d_initial = grid.empty_states(q.device, per_chunk=False)[:2] if has_init else None
    dct, dnt = d_final
    if dct is None and dnt is None:
        d_final_f32 = None
    else:
        zeros = grid.empty_states(q.device, per_chunk=False)
        dct = zeros[0].zero_() if dct is None else dct.float().contiguous()
        dnt = zeros[1].zero_() if dnt is None else dnt.float().contiguous()
        d_final_f32 = (dct, dnt)
    path = split_bwd if split else sequential_bwd
    path(q=q, k=k, v=v, i=i, f=f, chunks=chunks, dh=dh.contiguous(), d_final=d_final_f32, scale=scale, grid=grid,
         grads=grads, d_initial=d_initial)  # fmt: skip
    dc0, dn0 = d_initial or (None, None)
    return (*grads, dc0, dn0)


class MLSTMChunkFunction(torch.autograd.Function):
    """Autograd wrapper: :func:`mlstm_chunk_fwd` forward, :func:`mlstm_chunk_bwd` backward."""

    @staticmethod
    def forward(ctx, q, k, v, i, f, c0, n0, m0, scale, chunk_size, output_final_state, split=None):
        q, k, v, i, f = contiguous(q, k, v, i, f)
        has_init = c0 is not None
        h, final, chunks = mlstm_chunk_fwd(
            q,
            k,
            v,
            i,
            f,
            scale=scale,
            initial_state=(c0.float(), n0.float(), m0.float()) if has_init else None,
            output_final_state=output_final_state,
            chunk_size=chunk_size,
            store_chunks=any(ctx.needs_input_grad[:7]),
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
            picks by shape (:func:`use_split`). The result is the same either way (to rounding).

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
