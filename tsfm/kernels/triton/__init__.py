"""Triton kernels of the sequence-mixer ops, one folder per op (forward + backward kernels and the decode step).

Each op has the meaning of its reference in :mod:`tsfm.kernels.reference` (the executable spec) and the public signature
of :mod:`tsfm.kernels.ops`, which routes CUDA tensors here. The kernels also run on CPU tensors under
``TRITON_INTERPRET=1`` (how CI tests them). Importing this package imports Triton; :mod:`tsfm.kernels.ops` imports it
only when it dispatches a CUDA tensor. Nothing here knows about time series.
"""
