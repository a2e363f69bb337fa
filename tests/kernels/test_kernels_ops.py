"""The public ops of ``tsfm.kernels.ops``: dispatch, dtypes, fresh states, and clear errors for bad arguments."""

from __future__ import annotations

import importlib
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from tsfm import kernels
from tsfm.kernels import ops


def test_use_triton_is_off_for_now():
    assert ops._use_triton(torch.zeros(1)) is False


def test_ops_dispatch_to_the_reference_form(case, monkeypatch, rel_err):
    """On CPU every op runs the reference chunkwise form (sLSTM: its recurrent form), unchanged."""
    form = case.chunkwise or case.recurrent
    module = importlib.import_module(form.__module__)
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return form(*args, **kwargs)

    monkeypatch.setattr(module, form.__name__, spy)
    torch.manual_seed(0)
    x = case.inputs(50)
    out, _ = case.run_op(x.args, x.state, chunk_size=16)
    assert len(calls) == 1
    kwargs = {"chunk_size": 16} if case.chunkwise else {}
    want, _ = case.run(form, x.args, x.state, **kwargs)
    assert torch.equal(out, want)
    assert rel_err(out, case.run(case.recurrent, x.args, x.state)[0]) < 1e-10


def test_float32_op_is_close_to_float64_recurrent(case, rel_err):
    torch.manual_seed(1)
    x = case.inputs(150, dtype=torch.float64)
    want, _ = case.run(case.recurrent, x.args, x.state)
    state32 = None if x.state is None else _cast_state(x.state, torch.float32)
    got, _ = case.run_op([a.float() for a in x.args], state32, chunk_size=64)
    assert got.dtype == torch.float32
    assert rel_err(got, want) < 1e-5


def _cast_state(state, dtype):
    if isinstance(state, torch.Tensor):
        return state.to(dtype)
    return tuple(s.to(dtype) for s in state)


@pytest.mark.parametrize(
    ("dtype", "state_dtype"),
    [(torch.bfloat16, torch.float32), (torch.float32, torch.float32), (torch.float64, torch.float64)],
)
def test_output_keeps_the_input_dtype_and_states_are_float32_or_float64(case, dtype, state_dtype, state_tuple):
    torch.manual_seed(2)
    x = case.inputs(20, with_state=False, dtype=dtype)
    out, state = case.run_op(x.args, None)
    assert out.dtype == dtype
    assert all(s.dtype == state_dtype for s in state_tuple(state))
    y, step_state = case.step(*x.token(0), state)
    assert y.dtype == dtype
    assert all(s.dtype == state_dtype for s in state_tuple(step_state))


def test_init_states_have_the_documented_shapes_and_values():
    c, n, m = ops.mlstm_init_state(2, 3, 4, 5)
    assert (c.shape, n.shape, m.shape) == ((2, 3, 4, 5), (2, 3, 4), (2, 3))
    assert c.dtype == torch.float32 and not c.any() and not n.any() and bool((m == float("-inf")).all())
    assert ops.ssd_init_state(2, 3, 4, 5).shape == (2, 3, 4, 5)
    assert ops.gated_delta_rule_init_state(2, 3, 4, 5, dtype=torch.float64).dtype == torch.float64
    h, c, n, m = ops.slstm_init_state(2, 3, 4)
    assert all(s.shape == (2, 3, 4) for s in (h, c, n, m))
    assert not h.any() and not c.any() and not n.any() and bool((m == float("-inf")).all())


def test_first_mlstm_step_from_a_fresh_state_is_exact():
    """With ``m_0 = -inf`` the first token is read back as ``v (k.q) / (max(|k.q|, exp(-i)) + 1e-6)``."""
    torch.manual_seed(4)
    q, k, v = (torch.randn(1, 1, d, dtype=torch.float64) for d in (8, 8, 3))
    i, f = torch.tensor([[-3.0]], dtype=torch.float64), torch.tensor([[-40.0]], dtype=torch.float64)
    h, (_, _, m) = ops.mlstm_step(q, k, v, i, f, ops.mlstm_init_state(1, 1, 8, 3, dtype=torch.float64), scale=1.0)
    kq = (k * q).sum(-1, keepdim=True)
    want = v * kq / (torch.maximum(kq.abs(), torch.exp(-i)[..., None]) + 1e-6)
    assert torch.allclose(h, want, rtol=1e-14, atol=0)
    assert m.item() == -3.0


@pytest.mark.parametrize("name", ["mlstm", "gated_delta_rule"])
def test_scale_multiplies_q_and_defaults_to_inverse_sqrt_k(name, rel_err):
    torch.manual_seed(3)
    op = getattr(ops, name)
    q, k, v = torch.randn(1, 9, 2, 16), F.normalize(torch.randn(1, 9, 2, 16), dim=-1), torch.randn(1, 9, 2, 4)
    a, b = torch.randn(1, 9, 2), torch.rand(1, 9, 2)
    if name == "gated_delta_rule":
        a = F.logsigmoid(a)
    default, _ = op(q, k, v, a, b)
    explicit, _ = op(q * 16**-0.5 / 0.3, k, v, a, b, scale=0.3)
    assert rel_err(explicit, default) < 1e-6


def _good(length: int = 5) -> SimpleNamespace:
    """Well-formed arguments for every op (B=2, H=2, K=N=4, V=P=D=3)."""
    b, h, kd, vd = 2, 2, 4, 3
    return SimpleNamespace(
        q=torch.randn(b, length, h, kd),
        k=torch.randn(b, length, h, kd),
        v=torch.randn(b, length, h, vd),
        gate=torch.randn(b, length, h),
        A=torch.ones(h),
        x_gates=torch.randn(b, length, h, 4, vd),
        R=torch.randn(h, 4, vd, vd),
        mlstm_state=ops.mlstm_init_state(b, h, kd, vd),
        matrix_state=torch.zeros(b, h, kd, vd),
        slstm_state=ops.slstm_init_state(b, h, vd),
    )


BAD_CALLS = {
    "mlstm_T_mismatch": (lambda t: ops.mlstm(t.q, t.k, t.v[:, :4], t.gate, t.gate), r"mlstm: v has T=4 .* q has T=5"),
    "mlstm_q_rank": (lambda t: ops.mlstm(t.q[:, 0], t.k, t.v, t.gate, t.gate), r"mlstm: q must have 4 dimensions"),
    "mlstm_k_width": (lambda t: ops.mlstm(t.q, t.k[..., :3], t.v, t.gate, t.gate), r"mlstm: k has K=3 .* q has K=4"),
    "mlstm_f_rank": (lambda t: ops.mlstm(t.q, t.k, t.v, t.gate, t.gate[..., 0]), r"mlstm: f must have 3 dimensions"),
    "mlstm_state_shape": (
        lambda t: ops.mlstm(t.q, t.k, t.v, t.gate, t.gate, initial_state=(t.matrix_state[..., :2], *t.mlstm_state[1:])),
        r"mlstm: initial_state\[0\] has V=2",
    ),
    "mlstm_state_len": (
        lambda t: ops.mlstm(t.q, t.k, t.v, t.gate, t.gate, initial_state=t.mlstm_state[:2]),
        r"mlstm: initial_state must be a tuple of 3 tensors",
    ),
    "mlstm_chunk_size": (lambda t: ops.mlstm(t.q, t.k, t.v, t.gate, t.gate, chunk_size=0), r"mlstm: chunk_size"),
    "mlstm_empty": (
        lambda t: ops.mlstm(t.q[:, :0], t.k[:, :0], t.v[:, :0], t.gate[:, :0], t.gate[:, :0]),
        r"mlstm: q has T=0",
    ),
    "mlstm_int_gate": (
        lambda t: ops.mlstm(t.q, t.k, t.v, t.gate.long(), t.gate),
        r"mlstm: i must be a floating-point tensor",
    ),
    "mlstm_step_no_state": (
        lambda t: ops.mlstm_step(t.q[:, 0], t.k[:, 0], t.v[:, 0], t.gate[:, 0], t.gate[:, 0], None),
        r"mlstm_step: state must not be None",
    ),
    "mlstm_step_time_axis": (
        lambda t: ops.mlstm_step(t.q, t.k[:, 0], t.v[:, 0], t.gate[:, 0], t.gate[:, 0], t.mlstm_state),
        r"mlstm_step: q must have 3 dimensions",
    ),
    "ssd_A_heads": (lambda t: ops.ssd(t.v, t.gate, torch.ones(3), t.k, t.q), r"ssd: A has H=3 .* x has H=2"),
    "ssd_dt_T": (lambda t: ops.ssd(t.v, t.gate[:, :2], t.A, t.k, t.q), r"ssd: dt has T=2"),
    "ssd_C_width": (lambda t: ops.ssd(t.v, t.gate, t.A, t.k, t.q[..., :2]), r"ssd: C has N=2 .* B has N=4"),
    "ssd_state": (
        lambda t: ops.ssd(t.v, t.gate, t.A, t.k, t.q, initial_state=t.matrix_state[..., :1]),
        r"ssd: initial_state has P=1",
    ),
    "ssd_step_state": (
        lambda t: ops.ssd_step(t.v[:, 0], t.gate[:, 0], t.A, t.k[:, 0], t.q[:, 0], t.matrix_state[:1]),
        r"ssd_step: state has B=1",
    ),
    "gdn_beta_rank": (
        lambda t: ops.gated_delta_rule(t.q, t.k, t.v, t.gate, t.gate[..., None]),
        r"gated_delta_rule: beta must have 3 dimensions",
    ),
    "gdn_g_T": (lambda t: ops.gated_delta_rule(t.q, t.k, t.v, t.gate[:, 1:], t.gate), r"gated_delta_rule: g has T=4"),
    "gdn_step_state": (
        lambda t: ops.gated_delta_rule_step(
            t.q[:, 0], t.k[:, 0], t.v[:, 0], t.gate[:, 0], t.gate[:, 0], t.matrix_state[:, :1]
        ),
        r"gated_delta_rule_step: state has H=1",
    ),
    "slstm_gate_count": (lambda t: ops.slstm(t.x_gates[..., :3, :], t.R), r"slstm: x_gates must have size 4 at dim 3"),
    "slstm_R_width": (lambda t: ops.slstm(t.x_gates, t.R[..., :2]), r"slstm: R has D=2 .* x_gates has D=3"),
    "slstm_state": (
        lambda t: ops.slstm(t.x_gates, t.R, initial_state=(*t.slstm_state[:3], t.slstm_state[3][:, :1])),
        r"slstm: initial_state\[3\] has H=1",
    ),
    "slstm_step_rank": (lambda t: ops.slstm_step(t.x_gates, t.R, t.slstm_state), r"slstm_step: x_gates_t must have 4"),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_arguments_raise_a_value_error_naming_the_argument(name):
    call, message = BAD_CALLS[name]
    with pytest.raises(ValueError, match=message):
        call(_good())


def test_non_tensor_argument_raises_a_type_error():
    t = _good()
    with pytest.raises(TypeError, match=r"mlstm: q must be a torch.Tensor"):
        ops.mlstm(t.q.tolist(), t.k, t.v, t.gate, t.gate)


def test_package_exports_the_public_ops():
    for name in kernels.__all__:
        assert getattr(kernels, name) is getattr(ops, name)
    assert {"mlstm", "ssd", "gated_delta_rule", "slstm"} <= set(kernels.__all__)


def test_kernels_imports_no_other_package_of_ours():
    code = (
        "import sys, tsfm.kernels, tsfm.kernels.mlstm.reference, tsfm.kernels.ssd.reference, "
        "tsfm.kernels.gated_delta_rule.reference, tsfm.kernels.slstm.reference; "
        "bad = sorted(m for m in sys.modules if m.startswith('tsfm.') and not m.startswith('tsfm.kernels')); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
