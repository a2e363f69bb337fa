"""Public sequence-mixer ops used by the model: mLSTM, Mamba-2 SSD, the gated delta rule (Gated DeltaNet) and sLSTM.

Every op takes time-major ``[B, T, H, D]`` tensors, any ``T >= 1``, an optional initial state, and can return the
final state; gradients flow by autograd through the PyTorch code. States are float32 (float64 for float64 inputs);
outputs have the dtype of the value input. The ``*_step`` functions process one token for streaming decode and the
``*_init_state`` functions build a fresh state. Arguments are checked first and bad shapes raise a ``ValueError``
that names the argument.

Dispatch: :func:`_use_triton` is the single point that routes CUDA tensors to the Triton kernels beside each op's
reference (``tsfm.kernels.<op>.chunk``, ``.fused``, ``.step``; imported only then), the ``*_step`` functions to the
one-token decode kernels; CPU tensors and float64 inputs run the reference chunkwise form
(``tsfm.kernels.<op>.reference``; sLSTM: the recurrent form, its only form). This module knows nothing of time series.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from tsfm.kernels._validate import ShapeChecker, check_chunk_size
from tsfm.kernels.gated_delta_rule import reference as _gated_delta_rule
from tsfm.kernels.gated_delta_rule.reference import gated_delta_rule_init_state
from tsfm.kernels.mlstm import reference as _mlstm
from tsfm.kernels.mlstm.reference import MLSTMState, mlstm_init_state
from tsfm.kernels.slstm import reference as _slstm
from tsfm.kernels.slstm.reference import SLSTMState, slstm_init_state
from tsfm.kernels.ssd import reference as _ssd
from tsfm.kernels.ssd.reference import ssd_init_state

__all__ = [
    "MLSTMState",
    "SLSTMState",
    "gated_delta_rule",
    "gated_delta_rule_init_state",
    "gated_delta_rule_step",
    "mlstm",
    "mlstm_init_state",
    "mlstm_step",
    "slstm",
    "slstm_init_state",
    "slstm_step",
    "ssd",
    "ssd_init_state",
    "ssd_step",
]

_MLSTM_STATE = ("B H K V", "B H K", "B H")
_SLSTM_STATE = ("B H D", "B H D", "B H D", "B H D")


_TRITON_OPS = frozenset({"mlstm", "ssd", "gated_delta_rule", "slstm"})
"""Ops that have Triton kernels (all four); an op left out of this set would run its reference on every device."""

_force_reference = os.environ.get("TSFM_KERNELS", "").lower() == "reference"


@contextlib.contextmanager
def reference_kernels() -> Iterator[None]:
    """Run every op on its PyTorch reference form inside this block, on any device (for comparisons and debugging).

    Setting the environment variable ``TSFM_KERNELS=reference`` does the same for the whole process.
    """
    global _force_reference
    previous, _force_reference = _force_reference, True
    try:
        yield
    finally:
        _force_reference = previous


def _opaque_to_compile(op: Callable[..., Any]) -> Callable[..., Any]:
    """Keep ``torch.compile`` out of a sequence op: the model around it compiles (norms, FFNs, gates and the loss
    fuse), the op itself runs as written. Dynamo cannot trace our Triton launches (their ``@triton.jit`` helpers live
    in other modules), and the kernels need no fusing."""
    return torch.compiler.disable(op, recursive=True)


def _use_triton(t: Tensor, op: str = "mlstm") -> bool:
    """Whether ``op`` should run its Triton kernels for tensors like ``t``: the one dispatch point of this module.

    Yes for CUDA tensors in bf16, fp16 or fp32 when ``op`` has kernels and Triton imports; CPU tensors (and float64
    inputs, which the kernels do not take) always run the reference PyTorch form.

    Args:
        t: a representative input of the op (its device and dtype decide).
        op: the op's name (``"mlstm"``, ``"ssd"``, ``"gated_delta_rule"``, ``"slstm"``).
    """
    if _force_reference or not t.is_cuda or op not in _TRITON_OPS:
        return False
    if t.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        return False
    return importlib.util.find_spec("triton") is not None


@_opaque_to_compile
def mlstm(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    i: Tensor,
    f: Tensor,
    *,
    scale: float | None = None,
    initial_state: MLSTMState | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[Tensor, MLSTMState | None]:
    """mLSTM (xLSTM matrix memory), stabilised, over a whole sequence.

    ``h_t = C_t^T q_t / (max(|n_t^T q_t|, exp(-m_t)) + 1e-6)`` with ``C_t = f' C_{t-1} + i' k_t v_t^T``; see
    :mod:`tsfm.kernels.mlstm.reference` for the exact recurrence. The stabiliser ``m`` carries no gradient.

    Args:
        q: ``[B, T, H, K]`` queries (multiplied by ``scale``).
        k: ``[B, T, H, K]`` keys.
        v: ``[B, T, H, V]`` values.
        i: ``[B, T, H]`` input-gate pre-activations ``ĩ`` (gate ``exp(ĩ)``).
        f: ``[B, T, H]`` forget-gate pre-activations ``f̃`` (gate ``sigmoid(f̃)``).
        scale: multiplies ``q``; defaults to ``K ** -0.5``.
        initial_state: ``(C [B, H, K, V], n [B, H, K], m [B, H])`` to continue from; ``None`` is the fresh state of
            :func:`mlstm_init_state`.
        output_final_state: also return the state after the last token (to carry into the next call).
        chunk_size: tokens per chunk of the chunkwise form; trades parallelism against ``O(L^2)`` work per chunk.

    Returns:
        ``h [B, T, H, V]`` in the dtype of ``v``, and ``(C, n, m)`` after the last token or ``None``.

    Example:
        >>> q = k = torch.randn(2, 10, 4, 16); v = torch.randn(2, 10, 4, 32); i = f = torch.randn(2, 10, 4)
        >>> h, state = mlstm(q, k, v, i, f, output_final_state=True)  # h: [2, 10, 4, 32]
    """
    check = ShapeChecker("mlstm")
    check.tensor("q", q, "B T H K")
    check.tensor("k", k, "B T H K")
    check.tensor("v", v, "B T H V")
    check.tensor("i", i, "B T H")
    check.tensor("f", f, "B T H")
    check.state("initial_state", initial_state, _MLSTM_STATE)
    check.at_least_one("T")
    check_chunk_size("mlstm", chunk_size)
    if _use_triton(q, "mlstm"):
        from tsfm.kernels.mlstm.chunk import mlstm_chunk

        return mlstm_chunk(
            q,
            k,
            v,
            i,
            f,
            scale=scale,
            initial_state=initial_state,
            output_final_state=output_final_state,
            chunk_size=chunk_size,
        )
    return _mlstm.mlstm_chunkwise(
        q,
        k,
        v,
        i,
        f,
        scale=scale,
        initial_state=initial_state,
        output_final_state=output_final_state,
        chunk_size=chunk_size,
    )


def mlstm_step(
    q: Tensor, k: Tensor, v: Tensor, i: Tensor, f: Tensor, state: MLSTMState, *, scale: float | None = None
) -> tuple[Tensor, MLSTMState]:
    """One mLSTM token, for streaming decode; equal to :func:`mlstm` over that token.

    Args:
        q: ``[B, H, K]`` query (multiplied by ``scale``).
        k: ``[B, H, K]`` key.
        v: ``[B, H, V]`` value.
        i: ``[B, H]`` input-gate pre-activation.
        f: ``[B, H]`` forget-gate pre-activation.
        state: ``(C [B, H, K, V], n [B, H, K], m [B, H])``; never ``None``: start from :func:`mlstm_init_state`.
        scale: multiplies ``q``; defaults to ``K ** -0.5``.

    Returns:
        ``h [B, H, V]`` in the dtype of ``v`` and the new state.
    """
    check = ShapeChecker("mlstm_step")
    check.tensor("q", q, "B H K")
    check.tensor("k", k, "B H K")
    check.tensor("v", v, "B H V")
    check.tensor("i", i, "B H")
    check.tensor("f", f, "B H")
    check.state("state", state, _MLSTM_STATE, allow_none=False)
    if _use_triton(q, "mlstm"):
        from tsfm.kernels.mlstm.step import mlstm_step as triton_mlstm_step

        return triton_mlstm_step(q, k, v, i, f, state, scale=scale)
    return _mlstm.mlstm_step(q, k, v, i, f, state, scale=scale)


@_opaque_to_compile
def ssd(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    *,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor | None]:
    """Mamba-2 SSD over a whole sequence: ``S_t = exp(-A dt_t) S_{t-1} + dt_t B_t x_t^T``, ``y_t = S_t^T C_t``.

    There is no ``D x`` skip term: the layer adds it.

    Args:
        x: ``[B, T, H, P]`` inputs (the values).
        dt: ``[B, T, H]`` positive step sizes, already passed through softplus.
        A: ``[H]`` positive decay rates (``exp(A_log)``).
        B: ``[B, T, H, N]`` input projections (the keys).
        C: ``[B, T, H, N]`` output projections (the queries).
        initial_state: ``S [B, H, N, P]`` to continue from; ``None`` means zeros.
        output_final_state: also return the state after the last token.
        chunk_size: tokens per chunk of the chunkwise form.

    Returns:
        ``y [B, T, H, P]`` in the dtype of ``x``, and ``S [B, H, N, P]`` after the last token or ``None``.

    Example:
        >>> x = torch.randn(2, 10, 4, 32); dt = torch.rand(2, 10, 4); A = torch.ones(4)
        >>> B = C = torch.randn(2, 10, 4, 16)
        >>> y, _ = ssd(x, dt, A, B, C)  # y: [2, 10, 4, 32]
    """
    check = ShapeChecker("ssd")
    check.tensor("x", x, "B T H P")
    check.tensor("dt", dt, "B T H")
    check.tensor("A", A, "H")
    check.tensor("B", B, "B T H N")
    check.tensor("C", C, "B T H N")
    check.state("initial_state", initial_state, ("B H N P",))
    check.at_least_one("T")
    check_chunk_size("ssd", chunk_size)
    if _use_triton(x, "ssd"):
        from tsfm.kernels.ssd.chunk import ssd_chunk

        return ssd_chunk(
            x, dt, A, B, C, initial_state=initial_state, output_final_state=output_final_state, chunk_size=chunk_size
        )
    return _ssd.ssd_chunkwise(
        x, dt, A, B, C, initial_state=initial_state, output_final_state=output_final_state, chunk_size=chunk_size
    )


def ssd_step(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
    """One SSD token, for streaming decode; equal to :func:`ssd` over that token.

    Args:
        x: ``[B, H, P]`` input.
        dt: ``[B, H]`` positive step size.
        A: ``[H]`` positive decay rates.
        B: ``[B, H, N]`` input projection.
        C: ``[B, H, N]`` output projection.
        state: ``S [B, H, N, P]``; never ``None``: start from :func:`ssd_init_state`.

    Returns:
        ``y [B, H, P]`` in the dtype of ``x`` and the new state.
    """
    check = ShapeChecker("ssd_step")
    check.tensor("x", x, "B H P")
    check.tensor("dt", dt, "B H")
    check.tensor("A", A, "H")
    check.tensor("B", B, "B H N")
    check.tensor("C", C, "B H N")
    check.state("state", state, ("B H N P",), allow_none=False)
    if _use_triton(x, "ssd"):
        from tsfm.kernels.ssd.step import ssd_step as triton_ssd_step

        return triton_ssd_step(x, dt, A, B, C, state)
    return _ssd.ssd_step(x, dt, A, B, C, state)


@_opaque_to_compile
def gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    *,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor | None]:
    """The gated delta rule (Gated DeltaNet's recurrence) over a whole sequence.

    ``S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T``, ``o_t = S_t^T (scale q_t)``,
    ``alpha_t = exp(g_t)``. Any ``beta`` is accepted (``(0, 1)``, or ``(0, 2)`` for the variant with eigenvalues in
    ``[-1, 1]``).

    Args:
        q: ``[B, T, H, K]`` queries (multiplied by ``scale``).
        k: ``[B, T, H, K]`` keys, expected L2-normalised by the caller (not normalised here).
        v: ``[B, T, H, V]`` values.
        g: ``[B, T, H]`` log-decays ``<= 0``.
        beta: ``[B, T, H]`` write strengths of the delta rule.
        scale: multiplies ``q``; defaults to ``K ** -0.5``.
        initial_state: ``S [B, H, K, V]`` to continue from; ``None`` means zeros.
        output_final_state: also return the state after the last token.
        chunk_size: tokens per chunk of the chunkwise (WY / UT-transform) form.

    Returns:
        ``o [B, T, H, V]`` in the dtype of ``v``, and ``S [B, H, K, V]`` after the last token or ``None``.

    Example:
        >>> q = torch.randn(2, 10, 4, 16); k = torch.nn.functional.normalize(torch.randn(2, 10, 4, 16), dim=-1)
        >>> v = torch.randn(2, 10, 4, 32); g = -torch.rand(2, 10, 4); beta = torch.rand(2, 10, 4)
        >>> o, _ = gated_delta_rule(q, k, v, g, beta)  # o: [2, 10, 4, 32]
    """
    check = ShapeChecker("gated_delta_rule")
    check.tensor("q", q, "B T H K")
    check.tensor("k", k, "B T H K")
    check.tensor("v", v, "B T H V")
    check.tensor("g", g, "B T H")
    check.tensor("beta", beta, "B T H")
    check.state("initial_state", initial_state, ("B H K V",))
    check.at_least_one("T")
    check_chunk_size("gated_delta_rule", chunk_size)
    if _use_triton(q, "gated_delta_rule"):
        from tsfm.kernels.gated_delta_rule.chunk import gated_delta_rule_chunk

        return gated_delta_rule_chunk(
            q,
            k,
            v,
            g,
            beta,
            scale=scale,
            initial_state=initial_state,
            output_final_state=output_final_state,
            chunk_size=chunk_size,
        )
    return _gated_delta_rule.gated_delta_rule_chunkwise(
        q,
        k,
        v,
        g,
        beta,
        scale=scale,
        initial_state=initial_state,
        output_final_state=output_final_state,
        chunk_size=chunk_size,
    )


def gated_delta_rule_step(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor, *, scale: float | None = None
) -> tuple[Tensor, Tensor]:
    """One gated-delta-rule token, for streaming decode; equal to :func:`gated_delta_rule` over that token.

    Args:
        q: ``[B, H, K]`` query (multiplied by ``scale``).
        k: ``[B, H, K]`` key, expected L2-normalised.
        v: ``[B, H, V]`` value.
        g: ``[B, H]`` log-decay ``<= 0``.
        beta: ``[B, H]`` write strength.
        state: ``S [B, H, K, V]``; never ``None``: start from :func:`gated_delta_rule_init_state`.
        scale: multiplies ``q``; defaults to ``K ** -0.5``.

    Returns:
        ``o [B, H, V]`` in the dtype of ``v`` and the new state.
    """
    check = ShapeChecker("gated_delta_rule_step")
    check.tensor("q", q, "B H K")
    check.tensor("k", k, "B H K")
    check.tensor("v", v, "B H V")
    check.tensor("g", g, "B H")
    check.tensor("beta", beta, "B H")
    check.state("state", state, ("B H K V",), allow_none=False)
    if _use_triton(q, "gated_delta_rule"):
        from tsfm.kernels.gated_delta_rule.step import gated_delta_rule_step as triton_gated_delta_rule_step

        return triton_gated_delta_rule_step(q, k, v, g, beta, state, scale=scale)
    return _gated_delta_rule.gated_delta_rule_step(q, k, v, g, beta, state, scale=scale)


@_opaque_to_compile
def slstm(
    x_gates: Tensor,
    R: Tensor,
    *,
    initial_state: SLSTMState | None = None,
    output_final_state: bool = False,
) -> tuple[Tensor, SLSTMState | None]:
    """sLSTM (xLSTM scalar memory with block-diagonal recurrent gates) over a whole sequence; strictly sequential.

    See :mod:`tsfm.kernels.slstm.reference` for the exact recurrence. The stabiliser ``m`` carries no gradient.

    Args:
        x_gates: ``[B, T, H, 4, D]`` input part of the gate pre-activations ``W x_t + b``, gates ``(i, f, z, o)``.
        R: ``[H, 4, D, D]`` recurrent weights; gate ``g`` of head ``h`` adds ``h_{t-1}[b, h, :] @ R[h, g]``.
        initial_state: ``(h, c, n, m)``, each ``[B, H, D]``, to continue from; ``None`` is the fresh state of
            :func:`slstm_init_state`.
        output_final_state: also return the state after the last token.

    Returns:
        ``h [B, T, H, D]`` in the dtype of ``x_gates``, and ``(h, c, n, m)`` after the last token or ``None``.

    Example:
        >>> x_gates = torch.randn(2, 10, 4, 4, 16); R = 0.1 * torch.randn(4, 4, 16, 16)
        >>> h, state = slstm(x_gates, R, output_final_state=True)  # h: [2, 10, 4, 16]
    """
    check = ShapeChecker("slstm")
    check.tensor("x_gates", x_gates, "B T H 4 D")
    check.tensor("R", R, "H 4 D D")
    check.state("initial_state", initial_state, _SLSTM_STATE)
    check.at_least_one("T")
    if _use_triton(x_gates, "slstm"):
        from tsfm.kernels.slstm.fused import slstm_fused

        return slstm_fused(x_gates, R, initial_state=initial_state, output_final_state=output_final_state)
    return _slstm.slstm_recurrent(x_gates, R, initial_state=initial_state, output_final_state=output_final_state)


def slstm_step(x_gates_t: Tensor, R: Tensor, state: SLSTMState) -> tuple[Tensor, SLSTMState]:
    """One sLSTM token, for streaming decode; equal to :func:`slstm` over that token.

    Args:
        x_gates_t: ``[B, H, 4, D]`` input part of the gate pre-activations of this token, gates ``(i, f, z, o)``.
        R: ``[H, 4, D, D]`` recurrent weights.
        state: ``(h, c, n, m)``, each ``[B, H, D]``; never ``None``: start from :func:`slstm_init_state`.

    Returns:
        ``h [B, H, D]`` in the dtype of ``x_gates_t`` and the new state.
    """
    check = ShapeChecker("slstm_step")
    check.tensor("x_gates_t", x_gates_t, "B H 4 D")
    check.tensor("R", R, "H 4 D D")
    check.state("state", state, _SLSTM_STATE, allow_none=False)
    if _use_triton(x_gates_t, "slstm"):
        from tsfm.kernels.slstm.step import slstm_step as triton_slstm_step

        return triton_slstm_step(x_gates_t, R, state)
    return _slstm.slstm_step(x_gates_t, R, state)
