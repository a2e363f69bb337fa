"""Gated DeltaNet Triton kernels: the chunkwise forward/backward (:mod:`.chunk`) and the one-token decode step
(:mod:`.step`)."""

from tsfm.kernels.triton.gated_delta.chunk import (
    GatedDeltaChunkFunction,
    gated_delta_chunk,
    gated_delta_chunk_bwd,
    gated_delta_chunk_fwd,
)
from tsfm.kernels.triton.gated_delta.step import gated_delta_step

__all__ = [
    "GatedDeltaChunkFunction",
    "gated_delta_chunk",
    "gated_delta_chunk_bwd",
    "gated_delta_chunk_fwd",
    "gated_delta_step",
]
