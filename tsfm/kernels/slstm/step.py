"""sLSTM one-token decode on the GPU: the fused recurrent kernels over a single step, state in and state out.

One step is four ``[B, D] x [D, D]`` products per head and a few element-wise gates: one launch of the fused
forward with ``T = 1`` does exactly that, with the same gradients, so no separate kernel is kept in step with it.
"""

from __future__ import annotations

from torch import Tensor

from tsfm.kernels.slstm.fused import SLSTMState, slstm_fused


def slstm_step(x_gates_t: Tensor, R: Tensor, state: SLSTMState) -> tuple[Tensor, SLSTMState]:
    """One sLSTM token (same meaning as :func:`tsfm.kernels.ops.slstm_step`).

    Args:
        x_gates_t: ``[B, H, 4, D]`` input part of this token's gate pre-activations, gates ``(i, f, z, o)``.
        R: ``[H, 4, D, D]`` recurrent weights.
        state: ``(h, c, n, m)``, each ``[B, H, D]``.

    Returns:
        ``h [B, H, D]`` in the dtype of ``x_gates_t`` and the float32 state after the token.
    """
    h, new_state = slstm_fused(x_gates_t[:, None], R, initial_state=state, output_final_state=True)
    return h[:, 0], new_state
