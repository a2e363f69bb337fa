"""The mLSTM chunkwise Triton kernels against the float64 recurrent reference, on CPU under ``TRITON_INTERPRET=1``.

Outputs, final states and the gradients of every input and of the initial ``(C, n)``; ragged tails, ``T = 1``,
several chunks, state carry-over, and gates of +-50. Every case runs on both the sequential kernels
(``split=False``) and the split ones (``split=True``, parallel over chunks), whichever the shape heuristic would pick.
The kernel entry point is called directly on CPU tensors (the public op sends CPU tensors to the reference).

bf16 ``tl.dot`` operands (the default for bf16 inputs, off under ``TSFM_MLSTM_BF16_DOTS=0``; forced on here): bf16
inputs with an initial state and ragged tails, K x V = 40 x 72 (a 128-wide value tile), 64 x 64 (L = 64), 128 x 128 (L
capped to 32) and gates of +-50, both paths (same errors); tiles narrower than 64 keep float32 operands. Worst
relative error over the output, the final state and every gradient (the interpreter's bf16 casts round to nearest even
as on the GPU, :mod:`tsfm.kernels._triton_common`): 3.8e-3, 3.6e-3, 6.2e-3 (the initial ``n``'s gradient; 4.1e-3 on
float32 operands) and 3.3e-3. On the H200: <= 3.4e-3 at (2, 300, 4, 64) and (3, 64, 2, 128) (split path), 7.4e-3 at
(128, 200, 4, 64) (sequential). For comparison the default path (float32 operands, tf32) on the same bf16 cases:
3.7e-3, 3.7e-3, 4.1e-3, 3.8e-3: most of the error is the bf16 output, gradients and loss weights themselves. ``dĩ`` and
``df̃`` are the ill-conditioned ones (a reverse cumsum of differences): over six other seeds at 64 x 64 the default
path reaches 1.9e-2 in ``df̃`` on one, bf16 operands 3.1e-2 (1.9e-2 again if ``P v`` keeps float32 operands).
"""

from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("triton", reason="Triton is not installed (pip install triton==3.6.0)")

from tsfm.kernels._triton_common import block
from tsfm.kernels.mlstm import chunk_common
from tsfm.kernels.mlstm.chunk import mlstm_chunk, use_split
from tsfm.kernels.mlstm.chunk_common import use_bf16_dots
from tsfm.kernels.mlstm.chunk_split import state_tiles
from tsfm.kernels.mlstm.reference import mlstm_recurrent
from tsfm.kernels.testing import compare, rel_err, run_with_grads

B, H, K, V = 2, 2, 8, 16
TOL = 1e-4  # float32 kernel vs float64 reference (measured ~1e-6)
BF16_DOT_TOL = 1e-2  # bf16 inputs and bf16 dot operands vs float64 on the same rounded inputs (see the docstring)
SPLITS = pytest.mark.parametrize("split", [False, True], ids=["sequential", "split"])


def _inputs(length: int, with_state: bool, stress: bool = False, k_dim: int = K, v_dim: int = V):
    q, k = torch.randn(B, length, H, k_dim), torch.randn(B, length, H, k_dim)
    v = torch.randn(B, length, H, v_dim)
    if stress:
        i = (torch.randint(0, 2, (B, length, H)) * 2 - 1) * 50.0
        f = (torch.rand(B, length, H) * 2 - 1) * 50.0
    else:
        i, f = 3 * torch.randn(B, length, H), 2 + 2 * torch.randn(B, length, H)
    state = (torch.randn(B, H, k_dim, v_dim), torch.randn(B, H, k_dim), torch.randn(B, H)) if with_state else None
    return [q, k, v, i, f], state


def _errors(args, state, chunk_size: int, split: bool, dtype: torch.dtype = torch.float32) -> dict[str, float]:
    """Relative errors of the kernels (``dtype`` inputs) against the float64 recurrent reference."""
    return compare(
        mlstm_chunk,
        mlstm_recurrent,
        args,
        state,
        dtype=dtype,
        differentiable_state=(True, True, False),
        form_kwargs={"chunk_size": chunk_size, "split": split},
    )


@SPLITS
@pytest.mark.parametrize(
    ("length", "with_state", "chunk_size"),
    [(1, False, 16), (1, True, 16), (7, True, 16), (40, True, 16), (33, False, 16), (50, True, 64)],
)
def test_outputs_states_and_gradients_match_the_float64_reference(length, with_state, chunk_size, split):
    torch.manual_seed(length + 100 * with_state)
    args, state = _inputs(length, with_state)
    errors = _errors(args, state, chunk_size, split)
    assert len(errors) == 1 + 3 + 5 + 2 * with_state
    bad = {name: e for name, e in errors.items() if not e < TOL}
    assert not bad, bad


@SPLITS
def test_extreme_gates_stay_finite_and_exact(split):
    torch.manual_seed(5)
    args, state = _inputs(37, with_state=False, stress=True)
    errors = _errors(args, state, 16, split)
    bad = {name: e for name, e in errors.items() if not e < 1e-3}
    assert not bad, bad


@SPLITS
def test_two_calls_carrying_the_state_equal_one_call(split):
    torch.manual_seed(6)
    (q, k, v, i, f), _ = _inputs(30, with_state=False)
    whole, final = mlstm_chunk(q, k, v, i, f, output_final_state=True, chunk_size=16, split=split)
    first, mid = mlstm_chunk(
        q[:, :13], k[:, :13], v[:, :13], i[:, :13], f[:, :13], output_final_state=True, chunk_size=16, split=split
    )
    second, end = mlstm_chunk(
        q[:, 13:], k[:, 13:], v[:, 13:], i[:, 13:], f[:, 13:], initial_state=mid, output_final_state=True,
        chunk_size=16, split=split,
    )  # fmt: skip
    assert rel_err(torch.cat([first, second], dim=1), whole) < 1e-5
    for a, b in zip(end, final, strict=True):
        assert rel_err(a, b) < 1e-5


@SPLITS
def test_bf16_inputs_give_bf16_outputs_and_float32_states(split):
    torch.manual_seed(7)
    args, _ = _inputs(20, with_state=False)
    h, (c, n, m) = mlstm_chunk(*(a.bfloat16() for a in args), output_final_state=True, chunk_size=16, split=split)
    assert h.dtype == torch.bfloat16 and c.dtype == n.dtype == m.dtype == torch.float32
    want, _ = mlstm_recurrent(*(a.double() for a in args))
    assert rel_err(h, want) < 1e-2


@SPLITS
def test_wide_ragged_heads_split_the_state_over_tiles(split):
    # K = 40, V = 72 give 64- and 128-wide blocks: the split path's recurrences then run 2 x 4 tiles of 32 x 32
    # per (batch, head), masked at the ragged edges, and the chunk is capped at 32 tokens (a 128-wide tile).
    assert state_tiles(B * H, 64, 128) == (32, 32)
    torch.manual_seed(9)
    args, state = _inputs(45, with_state=True, k_dim=40, v_dim=72)
    errors = _errors(args, state, 16, split)
    bad = {name: e for name, e in errors.items() if not e < TOL}
    assert not bad, bad


def test_split_and_sequential_paths_agree():
    torch.manual_seed(10)
    args, state = _inputs(50, with_state=True)
    runs = [
        run_with_grads(
            mlstm_chunk,
            args,
            state,
            dtype=torch.float32,
            state_dtype=torch.float32,
            differentiable_state=(True, True, False),
            chunk_size=16,
            split=split,
        )
        for split in (False, True)
    ]
    (h0, s0, g0), (h1, s1, g1) = runs
    for a, b in zip([h0, *s0, *g0], [h1, *s1, *g1], strict=True):
        assert rel_err(a, b) < 1e-5


def test_the_heuristic_splits_long_sequences_over_few_heads(monkeypatch):
    from tsfm.kernels.mlstm import chunk

    monkeypatch.setattr(chunk, "SPLIT_BY_DEFAULT", True)
    # (B, T, H, D) -> chunks of 64 tokens (32 at D = 128): split where fewer (batch, head) pairs than SMs walk
    # several chunks; the H200 timings in benchmarks/RESULTS.md put the line there.
    assert use_split(8 * 8, 8192 // 64)  # (8, 8192, 8, 64)
    assert not use_split(1024 * 4, 1)  # (1024, 64, 4, 64): one chunk
    assert not use_split(1, 1)
    assert not use_split(64 * 8, 1024 // 64)  # (64, 1024, 8, 64)
    assert not use_split(128 * 4, 512 // 32)  # (128, 512, 4, 128)
    assert not use_split(256 * 8, 256 // 64)  # (256, 256, 8, 64)
    monkeypatch.setattr(chunk, "SPLIT_BY_DEFAULT", False)
    assert not use_split(8 * 8, 8192 // 64), "TSFM_MLSTM_SPLIT=0 keeps every shape sequential"


def test_decode_step_matches_the_reference_step():
    from tsfm.kernels.mlstm.reference import mlstm_step as reference_step
    from tsfm.kernels.mlstm.step import mlstm_step

    torch.manual_seed(8)
    (q, k, v, i, f), state = _inputs(3, with_state=True)
    for t in range(3):
        args = (q[:, t], k[:, t], v[:, t], i[:, t], f[:, t])
        got, got_state = mlstm_step(*args, state)
        want, want_state = reference_step(*(a.double() for a in args), tuple(s.double() for s in state))
        assert rel_err(got, want) < TOL
        for a, b in zip(got_state, want_state, strict=True):
            assert a.dtype == torch.float32 and rel_err(a, b) < TOL
        state = got_state


@pytest.fixture
def bf16_dots(monkeypatch):
    """Force the bf16-operand path on (:data:`chunk_common.DOT_BF16_BY_DEFAULT`, on by default but off under
    ``TSFM_MLSTM_BF16_DOTS=0``)."""
    monkeypatch.setattr(chunk_common, "DOT_BF16_BY_DEFAULT", True)


@SPLITS
@pytest.mark.parametrize(
    ("length", "k_dim", "v_dim", "chunk_size", "stress"),
    [(45, 40, 72, 16, False), (70, 64, 64, 64, False), (45, 128, 128, 64, False), (37, 64, 64, 16, True)],
    ids=["K40-V72", "K64-L64", "K128", "stress"],
)  # fmt: skip
def test_bf16_dot_operands_match_the_float64_reference(bf16_dots, length, k_dim, v_dim, chunk_size, stress, split):
    # bf16 inputs with an initial state and a ragged tail: 70 = 64 + 6, and at K = 128 the chunk is capped to 32
    # tokens (45 = 32 + 13); K40-V72 runs 64- and 128-wide tiles with ragged edges.
    assert use_bf16_dots(torch.bfloat16, block(k_dim), block(v_dim))
    torch.manual_seed(length + k_dim)
    args, state = _inputs(length, with_state=not stress, stress=stress, k_dim=k_dim, v_dim=v_dim)
    errors = _errors(args, state, chunk_size, split, dtype=torch.bfloat16)
    assert len(errors) == 1 + 3 + 5 + 2 * (not stress)
    bad = {name: e for name, e in errors.items() if not e < BF16_DOT_TOL}
    assert not bad, bad


def test_bf16_dots_are_on_by_default_and_only_for_bf16_inputs(monkeypatch):
    assert os.environ.get("TSFM_MLSTM_BF16_DOTS", "1") == "0" or chunk_common.DOT_BF16_BY_DEFAULT
    monkeypatch.setattr(chunk_common, "DOT_BF16_BY_DEFAULT", False)
    assert not use_bf16_dots(torch.bfloat16, 64, 64)
    monkeypatch.setattr(chunk_common, "DOT_BF16_BY_DEFAULT", True)
    assert use_bf16_dots(torch.bfloat16, 64, 64) and use_bf16_dots(torch.bfloat16, 128, 128)
    assert not use_bf16_dots(torch.float32, 64, 64), "float32 inputs keep float32 operands (ieee)"
    assert not use_bf16_dots(torch.float16, 64, 64), "fp16 inputs keep float32 operands (tf32)"
    assert not use_bf16_dots(torch.bfloat16, 32, 64), "tiles narrower than 64 were not checked on the H200"
