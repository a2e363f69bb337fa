"""Our patches to Triton 3.6's CPU interpreter (``tsfm/kernels/_triton_common.py``), which the CPU kernel tests rely
on."""

from __future__ import annotations

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed (pip install triton==3.6.0)")
tl = triton.language

import tsfm.kernels._triton_common  # noqa: E402,F401  (applies the patches)


@triton.jit
def _bf16_dot_kernel(a, b, c, N: tl.constexpr):
    o = tl.arange(0, N)
    x = tl.load(a + o[:, None] * N + o[None, :])
    y = tl.load(b + o[:, None] * N + o[None, :])
    tl.store(c + o[:, None] * N + o[None, :], tl.dot(x, y))


def test_dot_of_bfloat16_operands_multiplies_their_values_not_their_bits():
    torch.manual_seed(0)
    a, b = torch.randn(16, 16).bfloat16(), torch.randn(16, 16).bfloat16()
    c = torch.empty(16, 16)
    _bf16_dot_kernel[(1,)](a, b, c, N=16)
    want = a.float() @ b.float()  # bf16 products are exact in float32; only the summation order may differ
    assert (c - want).norm() / want.norm() < 1e-6


@triton.jit
def _round_to_bf16_kernel(a, b, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(b + o, tl.load(a + o).to(tl.bfloat16))


def test_float32_to_bf16_casts_round_to_nearest_even_as_on_the_gpu():
    a = torch.tensor([1 + 2**-8 + 2**-10, 1 + 2**-9, 1 + 3 * 2**-9, -(1 + 2**-8 + 2**-10)] + [0.0] * 12)
    b = torch.empty(16, dtype=torch.bfloat16)
    _round_to_bf16_kernel[(1,)](a, b, N=16)
    assert torch.equal(b, a.bfloat16())  # torch rounds to nearest even; truncation would give 1 + 2**-8, 1, ...
