"""The gated delta rule (the recurrence of Gated DeltaNet), one op in one folder: :mod:`.reference` (step, recurrent
and chunkwise PyTorch forms: the spec and the CPU path), :mod:`.chunk` (the chunkwise Triton op, forward and backward)
and :mod:`.step` (the one-token decode kernel).

The op, this folder and every function in it are called ``gated_delta_rule``; the backbone that uses it is registered
as ``"gdn"`` (:mod:`tsfm.backbones.gdn`), as ``"mamba2"`` uses ``ssd`` and ``"xlstm"`` uses ``mlstm`` and ``slstm``.

Importing this package imports nothing; the Triton modules import Triton.
"""
