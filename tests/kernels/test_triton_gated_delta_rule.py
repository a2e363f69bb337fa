"""The gated delta rule Triton kernels (Gated DeltaNet's recurrence) against the float64 recurrent reference, on CPU
under ``TRITON_INTERPRET=1``.

Outputs, final states and the gradients of every input (``q, k, v, g, beta``) and of the initial state; ragged
tails, ``T = 1``, several chunks, ``beta`` in ``(0, 1)`` and ``(0, 2)``, a value width split over programs, 128-wide
state tiles (32-token chunks), state carry-over, log-decays of ``logsigmoid(+-50)``, bf16 inputs, and the one-token
decode kernel. The kernel entry points are called directly on CPU tensors (the public op sends CPU tensors to the
reference).

Measured norm-wise relative errors (float32 kernel vs float64 reference, every output, state and gradient): at most
8e-7 on realistic inputs, 1e-6 with log-decays of ``logsigmoid(+-50)``, 8e-5 on nearly repeated keys with
``beta = 1.99`` (an ill-conditioned triangular system; PyTorch's float32 chunkwise reference gets 2e-5 there), and
4e-3 with bf16 inputs and gradients (the bf16 rounding of the output).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton", reason="Triton is not installed (pip install triton==3.6.0)")

from tsfm.kernels.gated_delta_rule.chunk import gated_delta_rule_chunk
from tsfm.kernels.gated_delta_rule.reference import gated_delta_rule_recurrent
from tsfm.kernels.testing import compare, rel_err

B, H, K, V = 2, 2, 8, 16
TOL = 1e-4  # float32 kernel vs float64 reference (measured <= 1e-6, stress inputs included)


def _inputs(
    length: int,
    with_state: bool,
    *,
    stress: bool = False,
    beta_max: float = 2.0,
    k_dim: int = K,
    v_dim: int = V,
    batch: int = B,
    heads: int = H,
):
    q = torch.randn(batch, length, heads, k_dim)
    k = F.normalize(torch.randn(batch, length, heads, k_dim), dim=-1)
    v = torch.randn(batch, length, heads, v_dim)
    shape = (batch, length, heads)
    if stress:
        extreme = (torch.randint(0, 2, shape) * 2 - 1) * 50.0
        uniform = (torch.rand(shape) * 2 - 1) * 50.0
        g = F.logsigmoid(torch.where(torch.rand(shape) < 0.5, extreme, uniform))
        beta = beta_max * torch.sigmoid(torch.where(torch.rand(shape) < 0.5, -extreme, uniform))
    else:
        g = F.logsigmoid(3 + 2 * torch.randn(shape))
        beta = beta_max * torch.sigmoid(torch.randn(shape))
    state = torch.randn(batch, heads, k_dim, v_dim) if with_state else None
    return [q, k, v, g, beta], state


def _errors(args, state, chunk_size: int, dtype: torch.dtype = torch.float32) -> dict[str, float]:
    return compare(
        gated_delta_rule_chunk,
        gated_delta_rule_recurrent,
        args,
        state,
        dtype=dtype,
        differentiable_state=(True,),
        form_kwargs={"chunk_size": chunk_size},
    )


@pytest.mark.parametrize(
    ("length", "with_state", "chunk_size", "beta_max"),
    [
        (1, False, 16, 2.0),
        (1, True, 64, 1.0),
        (7, True, 16, 2.0),
        (33, False, 16, 1.0),
        (40, True, 16, 2.0),
        (50, True, 64, 1.0),
        (50, False, 64, 2.0),
    ],
)
def test_outputs_states_and_gradients_match_the_float64_reference(length, with_state, chunk_size, beta_max):
    torch.manual_seed(length + 100 * with_state + chunk_size)
    args, state = _inputs(length, with_state, beta_max=beta_max)
    errors = _errors(args, state, chunk_size)
    assert len(errors) == 1 + 1 + 5 + with_state
    bad = {name: e for name, e in errors.items() if not e < TOL}
    assert not bad, bad


@pytest.mark.parametrize(("k_dim", "v_dim"), [(16, 64), (128, 128)])
def test_wide_tiles_split_values_and_short_chunks_match(k_dim, v_dim):
    """V = 64 with 4 (batch, head) pairs splits the value width over two programs; K = V = 128 caps chunks at 32."""
    torch.manual_seed(k_dim + v_dim)
    args, state = _inputs(40, True, k_dim=k_dim, v_dim=v_dim, heads=1 if k_dim == 128 else H)
    errors = _errors(args, state, 64)
    bad = {name: e for name, e in errors.items() if not e < TOL}
    assert not bad, bad


def test_extreme_gates_stay_finite_and_exact():
    torch.manual_seed(5)
    args, state = _inputs(37, with_state=True, stress=True)
    errors = _errors(args, state, 16)
    bad = {name: e for name, e in errors.items() if not e < TOL}
    assert not bad, bad


@pytest.mark.parametrize("beta_value", [1.0, 1.99])
def test_nearly_repeated_keys_stay_accurate(beta_value):
    """Keys 1% apart, no decay, a full 64-token chunk: the UT transform's triangular system is at its worst (with
    ``beta`` near 2 each token nearly reflects the last one's memory)."""
    torch.manual_seed(12)
    (q, k, v, g, beta), state = _inputs(64, True, k_dim=16, batch=1)
    k = F.normalize(k[:, :1] + 0.01 * k, dim=-1)
    g, beta = torch.zeros_like(g), torch.full_like(beta, beta_value)
    errors = _errors([q, k, v, g, beta], state, 64)
    bad = {name: e for name, e in errors.items() if not e < 1e-3}
    assert not bad, bad


def test_two_calls_carrying_the_state_equal_one_call():
    torch.manual_seed(6)
    (q, k, v, g, beta), _ = _inputs(30, with_state=False)
    whole, final = gated_delta_rule_chunk(q, k, v, g, beta, output_final_state=True, chunk_size=16)
    first, mid = gated_delta_rule_chunk(
        q[:, :13], k[:, :13], v[:, :13], g[:, :13], beta[:, :13], output_final_state=True
    )
    second, end = gated_delta_rule_chunk(
        q[:, 13:], k[:, 13:], v[:, 13:], g[:, 13:], beta[:, 13:], initial_state=mid, output_final_state=True
    )
    assert rel_err(torch.cat([first, second], dim=1), whole) < 1e-5
    assert rel_err(end, final) < 1e-5


def test_no_final_state_unless_asked():
    torch.manual_seed(9)
    args, state = _inputs(5, with_state=True)
    o, final = gated_delta_rule_chunk(*args, initial_state=state)
    assert final is None and o.shape == args[2].shape


def test_bf16_inputs_give_bf16_outputs_and_float32_states():
    torch.manual_seed(7)
    args, state = _inputs(20, with_state=True)
    o, final = gated_delta_rule_chunk(*(a.bfloat16() for a in args), initial_state=state, output_final_state=True)
    assert o.dtype == torch.bfloat16 and final.dtype == torch.float32
    want, want_final = gated_delta_rule_recurrent(
        *(a.bfloat16().double() for a in args), initial_state=state.double(), output_final_state=True
    )
    assert rel_err(o, want) < 1e-2
    assert rel_err(final, want_final) < 1e-2


def test_bf16_gradients_are_close():
    torch.manual_seed(8)
    args, state = _inputs(20, with_state=True)
    errors = _errors(args, state, 16, dtype=torch.bfloat16)
    bad = {name: e for name, e in errors.items() if not e < 1e-2}
    assert not bad, bad


def test_decode_step_matches_the_reference_step():
    from tsfm.kernels.gated_delta_rule.reference import gated_delta_rule_step as reference_step
    from tsfm.kernels.gated_delta_rule.step import gated_delta_rule_step

    torch.manual_seed(10)
    (q, k, v, g, beta), state = _inputs(3, with_state=True)
    for t in range(3):
        args = (q[:, t], k[:, t], v[:, t], g[:, t], beta[:, t])
        got, got_state = gated_delta_rule_step(*args, state)
        want, want_state = reference_step(*(a.double() for a in args), state.double())
        assert got.dtype == v.dtype and got_state.dtype == torch.float32
        assert rel_err(got, want) < TOL
        assert rel_err(got_state, want_state) < TOL
        state = got_state


def test_decode_step_equals_the_chunkwise_kernel_over_one_token():
    from tsfm.kernels.gated_delta_rule.step import gated_delta_rule_step

    torch.manual_seed(11)
    (q, k, v, g, beta), state = _inputs(1, with_state=True, k_dim=16, v_dim=64)
    got, got_state = gated_delta_rule_step(q[:, 0], k[:, 0], v[:, 0], g[:, 0], beta[:, 0], state, scale=0.3)
    want, want_state = gated_delta_rule_chunk(q, k, v, g, beta, scale=0.3, initial_state=state, output_final_state=True)
    assert rel_err(got, want[:, 0]) < 1e-6
    assert rel_err(got_state, want_state) < 1e-6


def test_decode_step_asked_for_gradients_uses_the_differentiable_kernels():
    from tsfm.kernels.gated_delta_rule.reference import gated_delta_rule_step as reference_step
    from tsfm.kernels.gated_delta_rule.step import gated_delta_rule_step

    torch.manual_seed(13)
    (q, k, v, g, beta), state = _inputs(1, with_state=True)
    args = [a[:, 0].clone().requires_grad_() for a in (q, k, v, g, beta)]
    o, new_state = gated_delta_rule_step(*args, state)
    (o.sum() + new_state.sum()).backward()
    ref_args = [a.detach().double().requires_grad_() for a in args]
    want, want_state = reference_step(*ref_args, state.double())
    (want.sum() + want_state.sum()).backward()
    for got, ref in zip(args, ref_args, strict=True):
        assert rel_err(got.grad, ref.grad) < TOL
