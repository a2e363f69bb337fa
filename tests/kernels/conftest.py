"""Shared cases for the kernels tests: one ``OpCase`` per op, with its forms and a random-input generator.

Fixtures rather than importable helpers, so the tests run under any pytest import mode: ``case`` runs a test once per
op (mLSTM, SSD, gated DeltaNet, sLSTM), ``chunk_case`` once per op that has a chunkwise form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from tsfm.kernels import ops
from tsfm.kernels.gated_delta_rule.reference import gated_delta_rule_chunkwise, gated_delta_rule_recurrent
from tsfm.kernels.mlstm.reference import mlstm_chunkwise, mlstm_recurrent
from tsfm.kernels.slstm.reference import slstm_recurrent
from tsfm.kernels.ssd.reference import ssd_chunkwise, ssd_recurrent

B, H, K, V = 2, 2, 8, 16  # small sizes for the exactness tests
STRESS_GATE = 50.0  # gate pre-activations of +-50 in the stability tests


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny tensors run fastest on one thread; restore the setting so other test folders are unaffected."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@dataclass
class Inputs:
    """Positional arguments of an op over a whole sequence, and an optional initial state.

    Args:
        args: the op's positional arguments, in order (``q, k, v, i, f`` for mLSTM).
        timed: for each argument, whether it has a time axis at dim 1 (``A`` and ``R`` do not).
        state: initial state (a tensor or a tuple of tensors) or ``None`` for a fresh one.
    """

    args: list[Tensor]
    timed: list[bool]
    state: Tensor | tuple[Tensor, ...] | None = None

    @property
    def length(self) -> int:
        return self.args[0].shape[1]

    def window(self, start: int, end: int) -> list[Tensor]:
        """The arguments restricted to tokens ``start:end``."""
        return [a[:, start:end] if t else a for a, t in zip(self.args, self.timed, strict=True)]

    def token(self, t: int) -> list[Tensor]:
        """The arguments of token ``t``, as the ``*_step`` functions take them."""
        return [a[:, t] if timed else a for a, timed in zip(self.args, self.timed, strict=True)]


def state_tensors(state: Tensor | tuple[Tensor, ...] | None) -> tuple[Tensor, ...]:
    """A state as a tuple of tensors (SSD and gated DeltaNet states are one tensor)."""
    if state is None:
        return ()
    return (state,) if isinstance(state, Tensor) else tuple(state)


def _gates(shape: tuple[int, ...], stress: bool, scale: float, shift: float) -> Tensor:
    """Gate pre-activations: ``shift + scale * N(0, 1)``, or in stress mode half ``+-50``, half uniform(-50, 50)."""
    if not stress:
        return shift + scale * torch.randn(shape)
    extreme = (torch.randint(0, 2, shape) * 2 - 1) * STRESS_GATE
    uniform = (torch.rand(shape) * 2 - 1) * STRESS_GATE
    return torch.where(torch.rand(shape) < 0.5, extreme, uniform)


def _make_mlstm(length: int, with_state: bool, stress: bool) -> Inputs:
    q, k = torch.randn(B, length, H, K), torch.randn(B, length, H, K)
    v = torch.randn(B, length, H, V)
    i = _gates((B, length, H), stress, 3.0, 0.0)
    f = _gates((B, length, H), stress, 2.0, 2.0)
    state = (torch.randn(B, H, K, V), torch.randn(B, H, K), torch.randn(B, H)) if with_state else None
    return Inputs([q, k, v, i, f], [True] * 5, state)


def _make_ssd(length: int, with_state: bool, stress: bool) -> Inputs:
    x = torch.randn(B, length, H, V)
    dt = F.softplus(_gates((B, length, H), stress, 1.0, -1.0))
    A = torch.tensor([0.05, 2.0]) if stress else torch.rand(H) + 0.5
    b, c = torch.randn(B, length, H, K), torch.randn(B, length, H, K)
    state = torch.randn(B, H, K, V) if with_state else None
    return Inputs([x, dt, A, b, c], [True, True, False, True, True], state)


def _make_gated_delta_rule(length: int, with_state: bool, stress: bool) -> Inputs:
    q = torch.randn(B, length, H, K)
    k = F.normalize(torch.randn(B, length, H, K), dim=-1)
    v = torch.randn(B, length, H, V)
    g = F.logsigmoid(_gates((B, length, H), stress, 2.0, 3.0))
    beta = 2 * torch.sigmoid(_gates((B, length, H), stress, 1.0, 0.0))  # the (0, 2) variant covers (0, 1)
    state = torch.randn(B, H, K, V) if with_state else None
    return Inputs([q, k, v, g, beta], [True] * 5, state)


def _make_slstm(length: int, with_state: bool, stress: bool) -> Inputs:
    x_gates = _gates((B, length, H, 4, V), stress, 2.0, 0.0)
    R = 0.3 * torch.randn(H, 4, V, V)
    state = None
    if with_state:
        state = (torch.tanh(torch.randn(B, H, V)), torch.randn(B, H, V), torch.rand(B, H, V) + 1, torch.randn(B, H, V))
    return Inputs([x_gates, R], [True, False], state)


@dataclass(frozen=True)
class OpCase:
    """One op and all of its forms.

    Args:
        name: the op's name.
        make_inputs: ``(length, with_state, stress) -> Inputs`` in float32 (tests cast to float64).
        recurrent: the reference recurrent form (the spec).
        chunkwise: the reference chunkwise form, or ``None`` (sLSTM).
        op: the public op of ``tsfm.kernels.ops``.
        step: the public one-token step.
        init_state: ``(inputs) -> fresh state`` for these inputs.
    """

    name: str
    make_inputs: Callable[[int, bool, bool], Inputs]
    recurrent: Callable
    chunkwise: Callable | None
    op: Callable
    step: Callable
    init_state: Callable[[Inputs], Tensor | tuple[Tensor, ...]]

    def inputs(
        self, length: int, *, with_state: bool = True, stress: bool = False, dtype: torch.dtype = torch.float64
    ) -> Inputs:
        """Random inputs (seeded by the caller) cast to ``dtype``."""
        inputs = self.make_inputs(length, with_state, stress)
        inputs.args = [a.to(dtype) for a in inputs.args]
        if inputs.state is not None:
            cast = tuple(s.to(dtype) for s in state_tensors(inputs.state))
            inputs.state = cast[0] if isinstance(inputs.state, Tensor) else cast
        return inputs

    def run(self, form: Callable, args: list[Tensor], state: object, **kwargs: object) -> tuple[Tensor, object]:
        """Call a sequence form with the final state requested."""
        return form(*args, initial_state=state, output_final_state=True, **kwargs)

    def run_op(self, args: list[Tensor], state: object, chunk_size: int = 16) -> tuple[Tensor, object]:
        """Call the public op (with ``chunk_size`` where the op has one)."""
        kwargs = {} if self.chunkwise is None else {"chunk_size": chunk_size}
        return self.run(self.op, args, state, **kwargs)


CASES = {
    "mlstm": OpCase(
        "mlstm",
        _make_mlstm,
        mlstm_recurrent,
        mlstm_chunkwise,
        ops.mlstm,
        ops.mlstm_step,
        lambda x: ops.mlstm_init_state(B, H, K, V, dtype=x.args[0].dtype),
    ),
    "ssd": OpCase(
        "ssd",
        _make_ssd,
        ssd_recurrent,
        ssd_chunkwise,
        ops.ssd,
        ops.ssd_step,
        lambda x: ops.ssd_init_state(B, H, K, V, dtype=x.args[0].dtype),
    ),
    "gated_delta_rule": OpCase(
        "gated_delta_rule",
        _make_gated_delta_rule,
        gated_delta_rule_recurrent,
        gated_delta_rule_chunkwise,
        ops.gated_delta_rule,
        ops.gated_delta_rule_step,
        lambda x: ops.gated_delta_rule_init_state(B, H, K, V, dtype=x.args[0].dtype),
    ),
    "slstm": OpCase(
        "slstm",
        _make_slstm,
        slstm_recurrent,
        None,
        ops.slstm,
        ops.slstm_step,
        lambda x: ops.slstm_init_state(B, H, V, dtype=x.args[0].dtype),
    ),
}


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest) -> OpCase:
    """Every op."""
    return CASES[request.param]


@pytest.fixture(params=[name for name, c in CASES.items() if c.chunkwise is not None])
def chunk_case(request: pytest.FixtureRequest) -> OpCase:
    """Every op with a chunkwise form (all but sLSTM)."""
    return CASES[request.param]


@pytest.fixture
def rel_err() -> Callable[[Tensor, Tensor], float]:
    """Norm-wise relative error ``|a - b| / |b|`` (``|a - b|`` when ``b`` is 0); -inf entries must agree exactly."""

    def _rel_err(a: Tensor, b: Tensor) -> float:
        assert a.shape == b.shape, (a.shape, b.shape)
        same_inf = torch.isinf(a) & (a == b)
        a, b = torch.where(same_inf, 0, a).double(), torch.where(same_inf, 0, b).double()
        denom = b.norm().item()
        return (a - b).norm().item() / (denom if denom > 0 else 1.0)

    return _rel_err


@pytest.fixture
def state_tuple() -> Callable[[object], tuple[Tensor, ...]]:
    """Turn any state into a tuple of tensors."""
    return state_tensors
