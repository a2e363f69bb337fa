"""Mamba-2 SSD Triton kernels: chunkwise forward/backward (:mod:`.chunk`) and the one-token decode (:mod:`.step`)."""

from tsfm.kernels.triton.ssd.chunk import SSDChunkFunction, ssd_chunk, ssd_chunk_bwd, ssd_chunk_fwd
from tsfm.kernels.triton.ssd.step import ssd_step

__all__ = ["SSDChunkFunction", "ssd_chunk", "ssd_chunk_bwd", "ssd_chunk_fwd", "ssd_step"]
