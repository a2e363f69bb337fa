"""mLSTM (the xLSTM matrix memory), one op in one folder: read the spec and its kernels side by side.

* :mod:`.reference`: the one-token step (the definition), the recurrent and the chunkwise PyTorch forms (the CPU path).
* :mod:`.chunk`: the chunkwise Triton op with its autograd function; it runs one of two kernel paths with the same
  math, :mod:`.chunk_sequential` (one program walks the chunks) or :mod:`.chunk_split` (parallel over chunks), built
  from the chunk body of :mod:`.chunk_common`.
* :mod:`.step`: the one-token decode on the GPU.

Importing this package imports nothing; the Triton modules import Triton.
"""
