"""The Mamba-2 SSD Triton kernels against the float64 recurrent reference, on CPU under ``TRITON_INTERPRET=1``.

Outputs, final states and the gradients of ``x, dt, A, B, C`` and of the initial state; ragged tails, ``T = 1``,
several chunks, a value width split over programs with the 32-token cap of 128-wide tiles, state carry-over, and
step sizes from gates of +-50 with decay rates 0.05 and 2. The kernel entry points are called directly on CPU
tensors (the public op sends CPU tensors to the reference).

Measured relative errors (float32 kernel vs float64 reference, these seeds): <= 7e-6 on the realistic cases (for
``dA``, a sum over batch and time; everything else <= 7e-7), <= 1.1e-5 on the stress inputs (<= 5e-5 over eight
seeds: the cumulative log-decay reaches several hundred inside a chunk, where float32 resolves differences of
~1e-4), 1.4e-7 for the decode step and <= 4.5e-3 for bf16 inputs (against the reference on the same rounded inputs).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton", reason="Triton is not installed (pip install triton==3.6.0)")

from tsfm.kernels.ssd.chunk import ssd_chunk
from tsfm.kernels.ssd.reference import ssd_recurrent
from tsfm.kernels.testing import compare, rel_err

B, H, N, P = 2, 2, 8, 16
TOL = 1e-4  # float32 kernel vs float64 reference (measured <= 7e-6)
STRESS_TOL = 1e-3  # stress inputs (measured <= 5e-5 over eight seeds)


def _inputs(length: int, with_state: bool, stress: bool = False, *, batch: int = B, n: int = N, p: int = P):
    x = torch.randn(batch, length, H, p)
    if stress:  # half +-50, half uniform(-50, 50): dt from ~2e-22 to 50
        extreme = (torch.randint(0, 2, (batch, length, H)) * 2 - 1) * 50.0
        uniform = (torch.rand(batch, length, H) * 2 - 1) * 50.0
        gates = torch.where(torch.rand(batch, length, H) < 0.5, extreme, uniform)
    else:
        gates = torch.randn(batch, length, H) - 1.0
    dt = F.softplus(gates)
    A = torch.tensor([0.05, 2.0]) if stress else torch.rand(H) + 0.5
    b, c = torch.randn(batch, length, H, n), torch.randn(batch, length, H, n)
    state = torch.randn(batch, H, n, p) if with_state else None
    return [x, dt, A, b, c], state


def _errors(args, state, chunk_size: int, dtype: torch.dtype = torch.float32) -> dict[str, float]:
    return compare(
        ssd_chunk,
        ssd_recurrent,
        args,
        state,
        dtype=dtype,
        differentiable_state=(True,),
        form_kwargs={"chunk_size": chunk_size},
    )


@pytest.mark.parametrize(
    ("length", "with_state", "chunk_size"),
    [(1, False, 16), (1, True, 64), (7, True, 16), (33, False, 16), (40, True, 16), (50, True, 64), (50, False, 64)],
)
def test_outputs_states_and_gradients_match_the_float64_reference(length, with_state, chunk_size):
    torch.manual_seed(length + 100 * with_state)
    args, state = _inputs(length, with_state)
    errors = _errors(args, state, chunk_size)
    assert len(errors) == 1 + 1 + 5 + with_state
    bad = {name: e for name, e in errors.items() if not e < TOL}
    assert not bad, bad


def test_wide_values_split_over_programs_and_capped_chunks():
    """``P = 128``: the forward splits it over two programs and the chunk is capped at 32 tokens (two chunks)."""
    torch.manual_seed(3)
    args, state = _inputs(40, with_state=True, batch=1, n=16, p=128)
    errors = _errors(args, state, chunk_size=64)
    bad = {name: e for name, e in errors.items() if not e < TOL}
    assert not bad, bad


@pytest.mark.parametrize("chunk_size", [16, 64])
def test_extreme_step_sizes_stay_finite_and_exact(chunk_size):
    torch.manual_seed(5)
    args, state = _inputs(37, with_state=chunk_size == 16, stress=True)
    errors = _errors(args, state, chunk_size)
    bad = {name: e for name, e in errors.items() if not e < STRESS_TOL}
    assert not bad, bad


def test_two_calls_carrying_the_state_equal_one_call():
    torch.manual_seed(6)
    (x, dt, A, b, c), _ = _inputs(30, with_state=False)
    whole, final = ssd_chunk(x, dt, A, b, c, output_final_state=True, chunk_size=16)
    first, mid = ssd_chunk(x[:, :13], dt[:, :13], A, b[:, :13], c[:, :13], output_final_state=True)
    second, end = ssd_chunk(
        x[:, 13:], dt[:, 13:], A, b[:, 13:], c[:, 13:], initial_state=mid, output_final_state=True, chunk_size=16
    )
    assert rel_err(torch.cat([first, second], dim=1), whole) < 1e-5
    assert rel_err(end, final) < 1e-5


def test_bf16_inputs_give_bf16_outputs_and_float32_states():
    torch.manual_seed(7)
    args, state = _inputs(20, with_state=True)
    y, final = ssd_chunk(*(a.bfloat16() for a in args), initial_state=state, output_final_state=True)
    assert y.dtype == torch.bfloat16 and final.dtype == torch.float32
    want, want_final = ssd_recurrent(
        *(a.bfloat16().double() for a in args), initial_state=state.double(), output_final_state=True
    )
    assert rel_err(y, want) < 1e-2 and rel_err(final, want_final) < 1e-2
    # Gradients too (compare rounds the reference's inputs to bf16 as well).
    errors = _errors(args, state, chunk_size=16, dtype=torch.bfloat16)
    bad = {name: e for name, e in errors.items() if not e < 1e-2}
    assert not bad, bad


def test_decode_step_matches_the_reference_step():
    from tsfm.kernels.ssd.reference import ssd_step as reference_step
    from tsfm.kernels.ssd.step import ssd_step

    torch.manual_seed(8)
    (x, dt, A, b, c), state = _inputs(3, with_state=True, n=16, p=48)  # P = 48: two P-blocks, the second ragged
    want_state = state.double()
    for t in range(3):
        args = (x[:, t], dt[:, t], A, b[:, t], c[:, t])
        got, new_state = ssd_step(*args, state)
        want, want_state = reference_step(*(a.double() for a in args), want_state)
        assert got.dtype == torch.float32 and new_state.dtype == torch.float32
        assert rel_err(got, want) < TOL and rel_err(new_state, want_state) < TOL
        state = new_state
    # In place: the new state overwrites the old one and equals the out-of-place result.
    args = (x[:, 0], dt[:, 0], A, b[:, 0], c[:, 0])
    expected_y, expected_state = ssd_step(*args, state)
    got_y, got_state = ssd_step(*args, state, out=state)
    assert got_state is state
    assert torch.equal(got_y, expected_y) and torch.equal(got_state, expected_state)
    # bf16 inputs: bf16 output, float32 state.
    y16, s16 = ssd_step(*(a.bfloat16() for a in args), expected_state)
    assert y16.dtype == torch.bfloat16 and s16.dtype == torch.float32


def test_decode_step_with_gradients_uses_the_differentiable_chunk_kernels():
    """Grad mode with an input that requires a gradient takes the chunkwise path: gradients equal the reference's."""
    from tsfm.kernels.ssd.reference import ssd_step as reference_step
    from tsfm.kernels.ssd.step import ssd_step

    torch.manual_seed(9)
    x, B_, C_ = torch.randn(2, 2, 16), torch.randn(2, 2, 8), torch.randn(2, 2, 8)
    dt, A, state = torch.rand(2, 2) + 0.1, torch.rand(2) + 0.5, torch.randn(2, 2, 8, 16)
    grads = []
    for step, dtype in ((ssd_step, torch.float32), (reference_step, torch.float64)):
        leaf = x.to(dtype).clone().requires_grad_()
        y, new_state = step(leaf, *(t.to(dtype) for t in (dt, A, B_, C_, state)))
        (y.sum() + new_state.sum()).backward()
        grads.append(leaf.grad)
    assert rel_err(grads[0], grads[1]) < TOL
