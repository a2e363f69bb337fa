"""Checking a Triton op against its float64 reference: outputs, final states and gradients of every input.

Used by the CPU tests (under ``TRITON_INTERPRET=1``) and by ``benchmarks/bench_kernels.py`` on the GPU, so both
check the same thing the same way. Imports no Triton.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor


def rel_err(a: Tensor | None, b: Tensor | None) -> float:
    """Norm-wise relative error ``|a - b| / |b|`` in float64 (``|a - b|`` when ``b`` is 0); NaN anywhere gives inf.

    Entries that are ``-inf`` in both (a fresh stabiliser) count as equal.
    """
    if a is None or b is None:
        return 0.0 if a is None and b is None else float("inf")
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    both_inf = torch.isinf(a) & (a == b)
    a, b = torch.where(both_inf, 0, a), torch.where(both_inf, 0, b)
    if torch.isnan(a).any() or torch.isinf(a).any():
        return float("inf")
    denom = b.norm().item()
    return (a - b).norm().item() / (denom if denom > 0 else 1.0)


def as_tuple(state: object) -> tuple[Tensor, ...]:
    """A state (``None``, one tensor or a tuple of tensors) as a tuple of tensors."""
    if state is None:
        return ()
    return (state,) if isinstance(state, Tensor) else tuple(state)


def run_with_grads(
    form: Callable,
    args: Sequence[Tensor],
    state: object,
    *,
    dtype: torch.dtype,
    state_dtype: torch.dtype,
    differentiable_state: Sequence[bool],
    seed: int = 1,
    **kwargs: object,
) -> tuple[Tensor, tuple[Tensor, ...], list[Tensor | None]]:
    """Run ``form(*args, initial_state=state, output_final_state=True)`` and backpropagate a random linear loss.

    The loss weights (drawn in float64 from ``seed``, so every dtype sees the same ones) cover the output and every
    differentiable final-state tensor, so the gradients test both paths.

    Args:
        form: the op (Triton or reference).
        args: its positional inputs; floating ones are cast to ``dtype`` (those that are parameters, like SSD's
            ``A`` or sLSTM's ``R``, too) and made leaves.
        state: initial state or ``None``; cast to ``state_dtype`` and made leaves where ``differentiable_state``.
        dtype: dtype of the inputs.
        state_dtype: dtype of the state tensors.
        differentiable_state: for each state tensor, whether it takes a gradient (mLSTM's ``m`` does not).
        seed: seed of the loss weights.
        **kwargs: passed to ``form``.

    Returns:
        The output, the final state and the gradients: inputs first, then the differentiable initial-state tensors.
    """
    leaves = [a.detach().to(dtype).clone().requires_grad_() for a in args]
    state_leaves: list[Tensor] = []
    if state is not None:
        cast = []
        for s, diff in zip(as_tuple(state), differentiable_state, strict=True):
            s = s.detach().to(state_dtype).clone()
            if diff:
                s.requires_grad_()
                state_leaves.append(s)
            cast.append(s)
        state = cast[0] if isinstance(state, Tensor) else tuple(cast)
    out, final = form(*leaves, initial_state=state, output_final_state=True, **kwargs)
    gen = torch.Generator().manual_seed(seed)

    def weights(t: Tensor) -> Tensor:
        return torch.randn(t.shape, generator=gen, dtype=torch.float64).to(device=t.device, dtype=t.dtype)

    loss = (out * weights(out)).float().sum()
    for s, diff in zip(as_tuple(final), differentiable_state, strict=True):
        if diff:
            loss = loss + (s * weights(s)).float().sum()
    grads = torch.autograd.grad(loss, [*leaves, *state_leaves], allow_unused=True)
    return out.detach(), tuple(s.detach() for s in as_tuple(final)), list(grads)


def compare(
    form: Callable,
    reference: Callable,
    args: Sequence[Tensor],
    state: object,
    *,
    dtype: torch.dtype,
    differentiable_state: Sequence[bool],
    form_kwargs: dict | None = None,
) -> dict[str, float]:
    """Relative errors of ``form`` (in ``dtype``, float32 states) against ``reference`` in float64 on the CPU.

    Returns:
        ``{"out": e, "state0": e, ..., "grad0": e, ...}`` (gradients in the order of :func:`run_with_grads`).
    """
    got = run_with_grads(
        form,
        args,
        state,
        dtype=dtype,
        state_dtype=torch.float32,
        differentiable_state=differentiable_state,
        **(form_kwargs or {}),
    )
    # The reference sees the same (rounded) inputs as the kernel: bf16 rounding of q, k near a cancelling
    # normaliser would otherwise dominate the error, which is then the input's conditioning, not the kernel's.
    cpu_args = [a.detach().to(dtype).cpu() for a in args]
    cpu_state = None if state is None else tuple(s.detach().cpu() for s in as_tuple(state))
    if isinstance(state, Tensor):
        cpu_state = cpu_state[0]
    want = run_with_grads(
        reference,
        cpu_args,
        cpu_state,
        dtype=torch.float64,
        state_dtype=torch.float64,
        differentiable_state=differentiable_state,
    )
    errors = {"out": rel_err(got[0], want[0])}
    for index, (g, w) in enumerate(zip(got[1], want[1], strict=True)):
        errors[f"state{index}"] = rel_err(g, w)
    for index, (g, w) in enumerate(zip(got[2], want[2], strict=True)):
        errors[f"grad{index}"] = rel_err(g, w)
    return errors
