"""sLSTM (the xLSTM scalar memory), one op in one folder: :mod:`.reference` (step and recurrent PyTorch forms: the spec
and the CPU path; strictly sequential, so no chunkwise form), :mod:`.fused` (the fused recurrent Triton op, forward and
backward) and :mod:`.step` (the one-token decode).

Importing this package imports nothing; the Triton modules import Triton.
"""
