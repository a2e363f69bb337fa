"""mLSTM Triton kernels: the chunkwise forward/backward (:mod:`.chunk`) and the one-token decode step (:mod:`.step`)."""

from tsfm.kernels.triton.mlstm.chunk import MLSTMChunkFunction, mlstm_chunk, mlstm_chunk_bwd, mlstm_chunk_fwd
from tsfm.kernels.triton.mlstm.step import mlstm_step

__all__ = ["MLSTMChunkFunction", "mlstm_chunk", "mlstm_chunk_bwd", "mlstm_chunk_fwd", "mlstm_step"]
