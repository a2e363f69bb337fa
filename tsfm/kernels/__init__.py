"""Sequence-mixer ops (mLSTM, Mamba-2 SSD, the gated delta rule, sLSTM) with step and chunkwise forms.

``kernels`` knows nothing of time series and imports no other package of this project. The public ops live in
:mod:`tsfm.kernels.ops`, the one dispatch point. Each op has one folder, its reference beside its kernels::

    tsfm/kernels/<op>/reference.py   step, recurrent and chunkwise PyTorch forms: the executable spec, the CPU path
    tsfm/kernels/<op>/chunk.py       the chunkwise Triton op (sLSTM: fused.py, the fused recurrent op)
    tsfm/kernels/<op>/step.py        the one-token decode on the GPU

for ``<op>`` in ``mlstm``, ``ssd``, ``gated_delta_rule``, ``slstm``. Shared helpers: :mod:`._reference_common`
(PyTorch) and :mod:`._triton_common` (Triton); :mod:`.testing` checks a kernel against its float64 reference.
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
