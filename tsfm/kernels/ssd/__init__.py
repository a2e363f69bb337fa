"""Mamba-2 SSD, one op in one folder: :mod:`.reference` (step, recurrent and chunkwise PyTorch forms: the spec and the
CPU path), :mod:`.chunk` (the chunkwise Triton op, forward and backward) and :mod:`.step` (the one-token decode kernel).

Importing this package imports nothing; the Triton modules import Triton.
"""
