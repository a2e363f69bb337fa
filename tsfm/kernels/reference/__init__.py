"""Reference PyTorch forms of the sequence-mixer ops: the executable spec and the CPU path.

One module per op. Each holds the one-token ``*_step`` (the definition), the ``*_recurrent`` form (a Python loop
over the step) and, where the recurrence is linear in the state, the ``*_chunkwise`` form (parallel inside chunks,
recurrent across chunks). sLSTM is strictly sequential and has no chunkwise form. Shapes are time-major
``[B, T, H, D]``; states are float32 (float64 for float64 inputs). Nothing here knows about time series.
"""

from tsfm.kernels.reference.gated_delta import (
    gated_delta_rule_chunkwise,
    gated_delta_rule_init_state,
    gated_delta_rule_recurrent,
    gated_delta_rule_step,
)
from tsfm.kernels.reference.mlstm import MLSTMState, mlstm_chunkwise, mlstm_init_state, mlstm_recurrent, mlstm_step
from tsfm.kernels.reference.slstm import SLSTMState, slstm_init_state, slstm_recurrent, slstm_step
from tsfm.kernels.reference.ssd import ssd_chunkwise, ssd_init_state, ssd_recurrent, ssd_step

__all__ = [
    "MLSTMState",
    "SLSTMState",
    "gated_delta_rule_chunkwise",
    "gated_delta_rule_init_state",
    "gated_delta_rule_recurrent",
    "gated_delta_rule_step",
    "mlstm_chunkwise",
    "mlstm_init_state",
    "mlstm_recurrent",
    "mlstm_step",
    "slstm_init_state",
    "slstm_recurrent",
    "slstm_step",
    "ssd_chunkwise",
    "ssd_init_state",
    "ssd_recurrent",
    "ssd_step",
]
