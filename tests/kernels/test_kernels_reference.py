"""The reference forms of every op agree: chunkwise == recurrent (outputs, states, gradients), state carry, steps.

Exactness runs in float64 against the recurrent form (the definition); the stability checks run in float32 with gate
pre-activations of +-50 over 4,096 tokens. The ``case`` / ``chunk_case`` fixtures come from ``conftest.py``.
"""

from __future__ import annotations

import pytest
import torch

from tsfm.kernels._reference_common import causal_mask, chunk_bounds, masked_exp
from tsfm.kernels.mlstm.reference import mlstm_chunkwise, mlstm_recurrent
from tsfm.kernels.slstm.reference import slstm_recurrent

EXACT = 1e-10  # forward: chunkwise vs recurrent, float64
EXACT_GRAD = 1e-8  # gradients: chunkwise vs recurrent, float64


def _leaf_state(state):
    """A copy of ``state`` whose tensors are leaves that require grad, and the tuple of those leaves."""
    if state is None:
        return None, ()
    if isinstance(state, torch.Tensor):
        leaf = state.clone().requires_grad_()
        return leaf, (leaf,)
    leaves = tuple(s.clone().requires_grad_() for s in state)
    return leaves, leaves


def _gradients(case, form, inputs, state_tuple, **kwargs):
    """Gradients of a random linear function of (output, final state) w.r.t. every input and the initial state."""
    args = [a.clone().requires_grad_() for a in inputs.args]
    state, state_leaves = _leaf_state(inputs.state)
    out, final = case.run(form, args, state, **kwargs)
    weights = torch.Generator().manual_seed(1)
    loss = (out * torch.randn(out.shape, generator=weights, dtype=out.dtype)).sum()
    for s in state_tuple(final):
        loss = loss + (s * torch.randn(s.shape, generator=weights, dtype=s.dtype)).sum()
    leaves = [*args, *state_leaves]
    return torch.autograd.grad(loss, leaves, allow_unused=True)


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("chunk_size", [16, 64])
@pytest.mark.parametrize("length", [1, 7, 64, 100, 257])
def test_chunkwise_matches_recurrent(chunk_case, length, chunk_size, with_state, rel_err, state_tuple):
    torch.manual_seed(1000 * length + chunk_size + with_state)
    x = chunk_case.inputs(length, with_state=with_state)
    out_ref, state_ref = chunk_case.run(chunk_case.recurrent, x.args, x.state)
    out, state = chunk_case.run(chunk_case.chunkwise, x.args, x.state, chunk_size=chunk_size)
    assert out.dtype == out_ref.dtype == torch.float64
    assert rel_err(out, out_ref) < EXACT
    for got, want in zip(state_tuple(state), state_tuple(state_ref), strict=True):
        assert got.dtype == torch.float64
        assert rel_err(got, want) < EXACT


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("chunk_size", [16, 64])
@pytest.mark.parametrize("length", [7, 100])
def test_chunkwise_gradients_match_recurrent(chunk_case, length, chunk_size, with_state, rel_err, state_tuple):
    torch.manual_seed(7 * length + chunk_size + with_state)
    x = chunk_case.inputs(length, with_state=with_state)
    want = _gradients(chunk_case, chunk_case.recurrent, x, state_tuple)
    got = _gradients(chunk_case, chunk_case.chunkwise, x, state_tuple, chunk_size=chunk_size)
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        if w is None:  # only the mLSTM stabiliser m of the initial state: it carries no gradient in any form
            assert g is None, index
        else:
            assert rel_err(g, w) < EXACT_GRAD, index


@pytest.mark.parametrize("form", [mlstm_recurrent, mlstm_chunkwise])
def test_mlstm_stabiliser_carries_no_gradient(form):
    """The mLSTM stabiliser ``m`` is detached in every form (DESIGN §3); ``C`` and ``n`` of the state get gradients."""
    torch.manual_seed(2)
    q, k, v = torch.randn(1, 5, 1, 4), torch.randn(1, 5, 1, 4), torch.randn(1, 5, 1, 4)
    i, f = torch.randn(1, 5, 1), torch.randn(1, 5, 1)
    state = tuple(s.requires_grad_() for s in (torch.randn(1, 1, 4, 4), torch.randn(1, 1, 4), torch.randn(1, 1)))
    h, final = form(q, k, v, i, f, initial_state=state, output_final_state=True)
    assert not final[2].requires_grad
    grads = torch.autograd.grad(h.sum() + final[0].sum() + final[1].sum(), state, allow_unused=True)
    assert grads[0] is not None and grads[1] is not None and grads[2] is None


def test_slstm_gradient_is_exact_despite_the_detached_stabiliser():
    """``h = o c / n`` does not depend on the stabiliser, so detaching ``m`` leaves the exact gradient (gradcheck)."""
    torch.manual_seed(6)
    x_gates = (2 * torch.randn(1, 6, 2, 4, 3, dtype=torch.float64)).requires_grad_()
    R = (0.5 * torch.randn(2, 4, 3, 3, dtype=torch.float64)).requires_grad_()
    h0, c0 = torch.randn(1, 2, 3, dtype=torch.float64), torch.randn(1, 2, 3, dtype=torch.float64)
    n0, m0 = torch.rand(1, 2, 3, dtype=torch.float64) + 1, torch.randn(1, 2, 3, dtype=torch.float64)
    h0, c0, n0 = (t.requires_grad_() for t in (h0, c0, n0))

    def run(x_gates, R, h0, c0, n0):  # only h: c and n on their own are scaled by the (detached) exp(-m)
        return slstm_recurrent(x_gates, R, initial_state=(h0, c0, n0, m0))[0]

    assert torch.autograd.gradcheck(run, (x_gates, R, h0, c0, n0))


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("split", [1, 37, 64])
def test_two_calls_with_carried_state_equal_one_call(case, split, with_state, rel_err, state_tuple):
    torch.manual_seed(split + 100 * with_state)
    x = case.inputs(100, with_state=with_state)
    out, state = case.run_op(x.args, x.state)
    out_a, state_a = case.run_op(x.window(0, split), x.state)
    out_b, state_b = case.run_op(x.window(split, x.length), state_a)
    assert rel_err(torch.cat([out_a, out_b], dim=1), out) < EXACT
    for got, want in zip(state_tuple(state_b), state_tuple(state), strict=True):
        assert rel_err(got, want) < EXACT


@pytest.mark.parametrize("with_state", [False, True])
def test_steps_equal_the_full_op(case, with_state, rel_err, state_tuple):
    torch.manual_seed(11 + with_state)
    x = case.inputs(40, with_state=with_state)
    out, final = case.run_op(x.args, x.state)
    state = x.state if with_state else case.init_state(x)
    outs = []
    for t in range(x.length):
        y, state = case.step(*x.token(t), state)
        outs.append(y)
    assert rel_err(torch.stack(outs, dim=1), out) < EXACT
    for got, want in zip(state_tuple(state), state_tuple(final), strict=True):
        assert rel_err(got, want) < EXACT


def test_fresh_state_equals_no_state(case, state_tuple):
    """``initial_state=None`` and an explicit ``*_init_state`` give bit-identical results in every form."""
    torch.manual_seed(3)
    x = case.inputs(30, with_state=False)
    fresh = case.init_state(x)
    forms = [(case.recurrent, {})] + ([(case.chunkwise, {"chunk_size": 16})] if case.chunkwise else [])
    for form, kwargs in forms:
        out_none, state_none = case.run(form, x.args, None, **kwargs)
        out_fresh, state_fresh = case.run(form, x.args, fresh, **kwargs)
        assert torch.equal(out_none, out_fresh)
        for a, b in zip(state_tuple(state_none), state_tuple(state_fresh), strict=True):
            assert torch.equal(a, b)


def test_extreme_gates_stay_finite(case, state_tuple):
    """T = 4096 in float32, gates +-50: outputs, states and all gradients finite, from a fresh and a carried state."""
    torch.manual_seed(0)
    x = case.inputs(4096, with_state=False, stress=True, dtype=torch.float32)
    args = [a.requires_grad_() for a in x.args]
    x.args = args
    half = x.length // 2
    out_a, state_a = case.run_op(x.window(0, half), None, chunk_size=64)
    out_b, state_b = case.run_op(x.window(half, x.length), state_a, chunk_size=64)
    loss = out_a.sum() + out_b.sum()
    for s in state_tuple(state_b):
        assert torch.isfinite(s).all()
        loss = loss + s.sum()
    assert torch.isfinite(out_a).all() and torch.isfinite(out_b).all()
    loss.backward()
    for index, a in enumerate(args):
        assert a.grad is not None and torch.isfinite(a.grad).all(), index


def test_each_check_can_fail(case, rel_err, state_tuple):
    """A 1e-6 change of the inputs of the last token moves output and final state far beyond the tolerance."""
    torch.manual_seed(5)
    x = case.inputs(100)
    fast, kwargs = (case.chunkwise, {"chunk_size": 16}) if case.chunkwise else (case.recurrent, {})
    out_ref, state_ref = case.run(case.recurrent, x.args, x.state)
    perturbed = [a.clone() for a in x.args]
    for a, timed in zip(perturbed, x.timed, strict=True):
        if timed:
            a[:, -1] *= 1 + 1e-6
    out, state = case.run(fast, perturbed, x.state, **kwargs)
    assert rel_err(out, out_ref) > 100 * EXACT
    assert max(rel_err(a, b) for a, b in zip(state_tuple(state), state_tuple(state_ref), strict=True)) > 100 * EXACT


def test_masked_exp_keeps_gradients_finite_where_exp_then_mask_does_not():
    """Why every form masks before ``exp``: the masked-out log-weights of future tokens can be huge."""
    log_w = torch.tensor([[0.0, 1000.0], [-1.0, 0.0]], requires_grad=True)
    mask = causal_mask(2, log_w.device)
    masked_exp(log_w, mask).sum().backward()
    assert torch.isfinite(log_w.grad).all()
    naive = torch.tensor([[0.0, 1000.0], [-1.0, 0.0]], requires_grad=True)
    (naive.exp() * mask).sum().backward()
    assert not torch.isfinite(naive.grad).all()


def test_chunk_bounds_cover_the_sequence_with_a_short_last_chunk():
    assert chunk_bounds(1, 64) == [(0, 1)]
    assert chunk_bounds(100, 64) == [(0, 64), (64, 100)]
    assert chunk_bounds(128, 64) == [(0, 64), (64, 128)]
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_bounds(10, 0)
