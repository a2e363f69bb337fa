"""The sLSTM fused recurrent Triton kernels against the float64 reference, on CPU under ``TRITON_INTERPRET=1``.

Outputs, final states and the gradients of ``x_gates``, ``R`` and the initial ``(h, c, n)``; ``T = 1``, a batch
that does not fill a block, state carry-over, gates of +-50. The kernel entry point is called directly on CPU
tensors (the public op sends CPU tensors to the reference). Interpreted steps are slow: sequences stay short.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="Triton is not installed (pip install triton==3.6.0)")

from tsfm.kernels.slstm.fused import slstm_fused
from tsfm.kernels.slstm.reference import slstm_recurrent
from tsfm.kernels.testing import compare, rel_err

B, H, D = 2, 2, 16
TOL = 1e-4  # float32 kernel vs float64 reference (measured ~3e-7)
DIFF_STATE = (True, True, True, False)  # h, c, n take gradients; the stabiliser m does not


def _inputs(length: int, with_state: bool, stress: bool = False, dim: int = D):
    uniform = (torch.rand(B, length, H, 4, dim) * 2 - 1) * 50.0
    x_gates = uniform if stress else 2 * torch.randn(B, length, H, 4, dim)
    R = 0.3 * dim**-0.5 * 4 * torch.randn(H, 4, dim, dim)  # 0.3 * randn at D = 16, the same gain at any width
    state = None
    if with_state:
        shape = (B, H, dim)
        state = (torch.tanh(torch.randn(shape)), torch.randn(shape), torch.rand(shape) + 1, torch.randn(shape))
    return [x_gates, R], state


@pytest.mark.parametrize(("length", "with_state"), [(1, False), (1, True), (9, True), (6, False)])
def test_outputs_states_and_gradients_match_the_float64_reference(length, with_state):
    torch.manual_seed(length + 100 * with_state)
    args, state = _inputs(length, with_state)
    errors = compare(slstm_fused, slstm_recurrent, args, state, dtype=torch.float32, differentiable_state=DIFF_STATE)
    assert len(errors) == 1 + 4 + 2 + 3 * with_state
    bad = {name: e for name, e in errors.items() if not e < TOL}
    assert not bad, bad


def test_heads_too_wide_for_r_on_chip_read_r_from_memory_and_stay_exact():
    """D = 96 pads to a 128-wide block, past R_ON_CHIP_MAX: the kernels stream R from memory at every step."""
    from tsfm.kernels.slstm.fused import R_ON_CHIP_MAX

    assert R_ON_CHIP_MAX < 96
    torch.manual_seed(11)
    args, state = _inputs(5, with_state=True, dim=96)
    errors = compare(slstm_fused, slstm_recurrent, args, state, dtype=torch.float32, differentiable_state=DIFF_STATE)
    bad = {name: e for name, e in errors.items() if not e < TOL}
    assert not bad, bad


def test_extreme_gates_stay_finite_and_exact():
    torch.manual_seed(5)
    args, state = _inputs(7, with_state=False, stress=True)
    errors = compare(slstm_fused, slstm_recurrent, args, state, dtype=torch.float32, differentiable_state=DIFF_STATE)
    bad = {name: e for name, e in errors.items() if not e < 1e-3}
    assert not bad, bad


def test_two_calls_carrying_the_state_equal_one_call():
    torch.manual_seed(6)
    (x_gates, R), _ = _inputs(8, with_state=False)
    whole, final = slstm_fused(x_gates, R, output_final_state=True)
    first, mid = slstm_fused(x_gates[:, :3], R, output_final_state=True)
    second, end = slstm_fused(x_gates[:, 3:], R, initial_state=mid, output_final_state=True)
    assert rel_err(torch.cat([first, second], dim=1), whole) < 1e-5
    for a, b in zip(end, final, strict=True):
        assert rel_err(a, b) < 1e-5


def test_bf16_inputs_give_bf16_outputs_and_float32_states():
    torch.manual_seed(7)
    (x_gates, R), _ = _inputs(5, with_state=False)
    h, state = slstm_fused(x_gates.bfloat16(), R, output_final_state=True)
    assert h.dtype == torch.bfloat16 and all(s.dtype == torch.float32 for s in state)
    want, _ = slstm_recurrent(x_gates.bfloat16().double(), R.double())
    assert rel_err(h, want) < 1e-2


@pytest.mark.parametrize("with_state", [False, True])
def test_bf16_gradients_with_the_bf16_products_of_dr_match_the_float64_reference(with_state):
    """bf16 inputs: ``dx_gates`` is written in bf16 and ``dR`` multiplies bf16 operands (float32 sums)."""
    torch.manual_seed(9 + with_state)
    args, state = _inputs(12, with_state=with_state, dim=32)
    errors = compare(slstm_fused, slstm_recurrent, args, state, dtype=torch.bfloat16, differentiable_state=DIFF_STATE)
    bad = {name: e for name, e in errors.items() if not e < 1e-2}
    assert not bad, bad


def test_dr_split_over_several_row_slices_with_a_ragged_last_slice_is_exact():
    """520 rows ``(b, t)``: two slices of 320 and 200 rows, each program's partial ``dR`` summed by the caller.

    13 x 40 rather than a long sequence: the interpreted recurrence walks every step, and a batch of 13 still fits
    one (partly masked) batch block."""
    from tsfm.kernels.slstm.fused import BB, _dr_slices

    batch, length = 13, 40
    assert batch < BB
    assert _dr_slices(batch * length, H, 64) == (2, 320)
    torch.manual_seed(12)
    x_gates = 2 * torch.randn(batch, length, H, 4, D)
    R = 0.3 * torch.randn(H, 4, D, D)
    state = (*tuple(torch.randn(batch, H, D) for _ in range(3)), torch.randn(batch, H, D))
    state = (torch.tanh(state[0]), state[1], state[2].abs() + 1, state[3])
    errors = compare(
        slstm_fused, slstm_recurrent, [x_gates, R], state, dtype=torch.float32, differentiable_state=DIFF_STATE
    )
    bad = {name: e for name, e in errors.items() if not e < TOL}
    assert not bad, bad


def test_decode_step_matches_the_reference_step():
    from tsfm.kernels.slstm.reference import slstm_step as reference_step
    from tsfm.kernels.slstm.step import slstm_step

    torch.manual_seed(8)
    (x_gates, R), state = _inputs(3, with_state=True)
    for t in range(3):
        got, got_state = slstm_step(x_gates[:, t], R, state)
        want, want_state = reference_step(x_gates[:, t].double(), R.double(), tuple(s.double() for s in state))
        assert rel_err(got, want) < TOL
        for a, b in zip(got_state, want_state, strict=True):
            assert a.dtype == torch.float32 and rel_err(a, b) < TOL
        state = got_state
