"""sLSTM Triton kernels: the fused recurrent forward/backward (:mod:`.fused`) and the one-token step (:mod:`.step`)."""

from tsfm.kernels.triton.slstm.fused import SLSTMFusedFunction, slstm_fused, slstm_fused_bwd, slstm_fused_fwd
from tsfm.kernels.triton.slstm.step import slstm_step

__all__ = ["SLSTMFusedFunction", "slstm_fused", "slstm_fused_bwd", "slstm_fused_fwd", "slstm_step"]
