"""Helpers shared by the Triton kernels of every op: block and chunk sizes, the ``tl.dot`` precision for an input
dtype, the ``@triton.jit`` helpers more than one op uses, and the patches that let Triton 3.6's interpreter run them.

Nothing here launches a kernel or knows an op. The Triton ops run on CUDA tensors, and on CPU tensors under
``TRITON_INTERPRET=1`` (the CI path); they never call CUDA APIs themselves, so both work.
"""

from __future__ import annotations

import os

import numpy as np
import torch
import triton
import triton.language as tl


def _patch_interpreter_index() -> None:
    """Let ``range(n)`` take a run-time scalar under Triton 3.6's interpreter with numpy >= 2.

    The interpreter holds kernel scalars as 1-element arrays and turns them into loop bounds with ``int(array)``,
    which numpy 2 refuses for arrays of one dimension ("only 0-dimensional arrays can be converted to Python
    scalars"). We re-register ``__index__`` to read the one element. Only the interpreter is touched; compiled
    kernels never see this. Without it the pair (triton 3.6, numpy 2.x) cannot run a loop over chunks.
    """
    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_tsfm_index_patch", False):
        return

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    patched._tsfm_index_patch = True
    interpreter._patch_lang_tensor = patched


def _patch_interpreter_bf16_dot() -> None:
    """Let ``tl.dot`` take bfloat16 operands under Triton 3.6's interpreter.

    The interpreter stores bfloat16 tensors as their raw ``uint16`` bits and its ``create_dot`` multiplies those
    integers as they are (a 16 x 16 product of ``randn`` comes out ~1e9 off), so a kernel that feeds bf16 operands
    to the matrix units, as the fast GPU paths do, could not be checked on the CPU. We widen bf16 operands to
    float32 first, which is exact, and then multiply as the interpreter does for every other dtype.
    """
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.create_dot
    if getattr(original, "_tsfm_bf16_patch", False):
        return
    bf16 = interpreter.tl.bfloat16

    def widen(handle):
        if handle.dtype.scalar != bf16:
            return handle
        data = interpreter._convert_float(handle.data, bf16, interpreter.tl.float32, None).view(np.float32)
        return interpreter.TensorHandle(data, interpreter.tl.float32)

    def patched(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    patched._tsfm_bf16_patch = True
    builder.create_dot = patched


def _patch_interpreter_bf16_rounding() -> None:
    """Make Triton 3.6's interpreter round float32 -> bf16 casts to nearest even, as the GPU does.

    The interpreter truncates, which pushes every rounded value towards zero: the errors of a kernel that rounds its
    ``tl.dot`` operands to bf16 then add up instead of cancelling and come out about twice the GPU's, so the CPU
    check would judge a different kernel from the one that runs.
    """
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.cast_impl
    if getattr(original, "_tsfm_rounding_patch", False):
        return
    tl = interpreter.tl

    def patched(self, src, dst_type):
        if src.dtype.scalar != tl.float32 or dst_type.scalar != tl.bfloat16:
            return original(self, src, dst_type)
        wide = torch.from_numpy(np.ascontiguousarray(src.data, dtype=np.float32))
        return interpreter.TensorHandle(wide.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16), tl.bfloat16)

    patched._tsfm_rounding_patch = True
    builder.cast_impl = patched


if os.environ.get("TRITON_INTERPRET") == "1":
    _patch_interpreter_index()
    _patch_interpreter_bf16_dot()
    _patch_interpreter_bf16_rounding()


def block(n: int, minimum: int = 16) -> int:
    """A power-of-two block covering ``n`` elements, at least ``minimum`` (``tl.dot`` needs dims >= 16 on GPUs)."""
    return max(minimum, triton.next_power_of_2(n))


def chunk_block(length: int, chunk_size: int) -> int:
    """Tokens per chunk of a chunkwise kernel: ``chunk_size`` rounded to a power of two in ``[16, 128]``, no larger
    than the sequence needs. The chunkwise forms give the same result for any chunk size, so rounding is safe."""
    return min(block(min(max(chunk_size, 16), 128)), block(length))


def dot_precision(dtype: torch.dtype) -> str:
    """``tl.dot`` precision: ``"ieee"`` for float32 inputs (full float32 products), ``"tf32"`` for bf16/fp16 inputs
    (their mantissa is shorter than tf32's, so the matrix units lose nothing that the inputs had)."""
    return "ieee" if dtype == torch.float32 else "tf32"


def contiguous(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """The tensors made contiguous (kernels index them with their dense strides)."""
    return [t.contiguous() for t in tensors]


@triton.jit
def last_row(x, o_t, BT: tl.constexpr):
    """The element of a ``[BT]`` vector at row ``BT - 1`` (a scalar): a chunk's last row, ragged or not."""
    return tl.sum(tl.where(o_t == BT - 1, x, 0.0), axis=0)


@triton.jit
def logsigmoid(x):
    """``log(sigmoid(x))`` without overflow for large ``|x|``."""
    return tl.minimum(x, 0.0) - tl.log(1.0 + tl.exp(-tl.abs(x)))
