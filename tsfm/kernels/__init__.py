"""Sequence-mixer ops (mLSTM, Mamba-2 SSD, gated DeltaNet, sLSTM) with step and chunkwise forms.

``kernels`` knows nothing of time series and imports no other package of this project. Public ops live in
:mod:`tsfm.kernels.ops`; the executable spec (step, recurrent and chunkwise PyTorch forms) in
:mod:`tsfm.kernels.reference`.
"""

from tsfm.kernels.ops import (
    MLSTMState,
    SLSTMState,
    gated_delta_rule,
    gated_delta_rule_init_state,
    gated_delta_rule_step,
    mlstm,
    mlstm_init_state,
    mlstm_step,
    slstm,
    slstm_init_state,
    slstm_step,
    ssd,
    ssd_init_state,
    ssd_step,
)

__all__ = [
    "MLSTMState",
    "SLSTMState",
    "gated_delta_rule",
    "gated_delta_rule_init_state",
    "gated_delta_rule_step",
    "mlstm",
    "mlstm_init_state",
    "mlstm_step",
    "slstm",
    "slstm_init_state",
    "slstm_step",
    "ssd",
    "ssd_init_state",
    "ssd_step",
]
