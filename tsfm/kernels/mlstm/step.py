"""mLSTM one-token decode on the GPU: the chunkwise kernels over a single token, state in and state out.

For decode the work per token is one ``K x V`` state update per head, bound by reading and writing the state; the
chunkwise forward does exactly that for ``T = 1`` (one chunk, one launch), with the same stabiliser and gradients,
so no separate kernel is kept in step with it.
"""

from __future__ import annotations

from torch import Tensor

from tsfm.kernels.mlstm.chunk import MLSTMState, mlstm_chunk


def mlstm_step(
    q: Tensor, k: Tensor, v: Tensor, i: Tensor, f: Tensor, state: MLSTMState, *, scale: float | None = None
) -> tuple[Tensor, MLSTMState]:
    """One mLSTM token (same meaning as :func:`tsfm.kernels.ops.mlstm_step`).

    Args:
        q: ``[B, H, K]``; k: ``[B, H, K]``; v: ``[B, H, V]``; i, f: ``[B, H]`` gate pre-activations.
        state: ``(C [B, H, K, V], n [B, H, K], m [B, H])``.
        scale: multiplies ``q``; defaults to ``K ** -0.5``.

    Returns:
        ``h [B, H, V]`` in the dtype of ``v`` and the float32 state after the token.
    """
    h, new_state = mlstm_chunk(
        q[:, None], k[:, None], v[:, None], i[:, None], f[:, None], scale=scale, initial_state=state,
        output_final_state=True,
    )  # fmt: skip
    return h[:, 0], new_state
