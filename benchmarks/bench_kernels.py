"""Check and time our Triton sequence-mixer kernels on a GPU, side by side with our PyTorch reference.

One run does, for each op that has Triton kernels:

1. **Check** (bf16 and fp32 inputs, fp32 states): outputs, final states and the gradients of every input and of the
   initial state against the float64 reference on the CPU, by relative L2 error; bf16 must be within 1e-2, fp32
   within 1e-3, and nothing may be NaN.
2. **Time** at the TSFM shapes ``(B, T, H, D)`` with bf16 inputs: forward, and forward + backward, median of
   ``triton.testing.do_bench``; tokens/s; peak memory; the byte/FLOP floor (METHOD.md: bytes read and written once
   over the copy bandwidth measured in this run, FLOPs over the bf16 matrix rate measured in this run) and the
   fraction of it reached. Our PyTorch reference (``tsfm.kernels.<op>.reference``, chunkwise; sLSTM: its loop) runs
   beside it.

The public peers (FLA, mlstm_kernels, mamba_ssm, flashrnn) are timed by ``../shared/tools/peer_kernels_bench.py``;
``--peers DIR`` runs its driver from ``DIR`` (a copy in the git-ignored ``.peer/``) in the same call.

Usage (repository root, on the GPU machine)::

    PYTHONUNBUFFERED=1 python -m benchmarks.bench_kernels [--ops mlstm,slstm] [--shapes all|small] [--out $OUT]

Writes ``kernels.jsonl`` and ``kernels.md`` to ``--out`` (default ``$OUT`` or ``/tmp``) and prints the table last.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from tsfm.kernels.gated_delta_rule.reference import gated_delta_rule_chunkwise
from tsfm.kernels.mlstm.reference import mlstm_chunkwise
from tsfm.kernels.slstm.reference import slstm_recurrent
from tsfm.kernels.ssd.reference import ssd_chunkwise
from tsfm.kernels.testing import as_tuple, compare, rel_err

SHAPES = [(1024, 64, 4, 64), (256, 256, 8, 64), (64, 1024, 8, 64), (128, 512, 4, 128), (8, 8192, 8, 64)]
TOL = {torch.bfloat16: 1e-2, torch.float32: 1e-3}


@dataclass
class Op:
    """One mixer: how to make its inputs, its Triton entry point, its reference, and its byte/FLOP counts.

    Args:
        name: the op's name.
        make: ``(B, T, H, D, dtype, device) -> (args, initial_state)``; args are leaves that require grad.
        triton: the Triton sequence form (``form(*args, initial_state=, output_final_state=)``).
        reference: the PyTorch reference sequence form (chunkwise where there is one).
        spec: the float64 reference for the check (recurrent or chunkwise; they agree to 1e-10).
        differentiable_state: per state tensor, whether it has a gradient.
        bytes_fwd: ``(B, T, H, D) -> bytes`` the forward must read and write at least (bf16 tensors, fp32 gates).
        flops_fwd: ``(B, T, H, D) -> FLOPs`` of the forward at chunk 64.
        check_shapes: ``(B, T, H, D, with_state)`` for the correctness check.
        shapes: ``(B, T, H, D)`` to time (sLSTM: flashrnn's grid added).
        reference_max_tokens_per_row: skip timing the reference past this ``T`` (the sLSTM loop is minutes there).
    """

    name: str
    make: Callable
    triton: Callable
    reference: Callable
    spec: Callable
    differentiable_state: tuple[bool, ...]
    bytes_fwd: Callable[[int, int, int, int], float]
    flops_fwd: Callable[[int, int, int, int], float]
    check_shapes: tuple[tuple[int, int, int, int, bool], ...] = ((2, 300, 4, 64, True), (3, 64, 2, 128, False))
    shapes: tuple[tuple[int, int, int, int], ...] = tuple(SHAPES)
    reference_max_tokens_per_row: int = 1 << 30


def _mlstm_make(b, t, h, d, dtype, device, with_state=False):
    q, k, v = (torch.randn(b, t, h, d, device=device, dtype=dtype) for _ in range(3))
    i = 3 * torch.randn(b, t, h, device=device)
    f = 2 + 2 * torch.randn(b, t, h, device=device)
    state = None
    if with_state:
        state = (
            torch.randn(b, h, d, d, device=device),
            torch.randn(b, h, d, device=device),
            torch.randn(b, h, device=device),
        )
    return [q, k, v, i.to(dtype), f.to(dtype)], state


def _mlstm_triton(*args, **kwargs):
    from tsfm.kernels.mlstm.chunk import mlstm_chunk

    return mlstm_chunk(*args, **kwargs)


def _mlstm_sequential(*args, **kwargs):
    """The mLSTM kernels without the chunk-parallel split (one program per (batch, head) walks the chunks)."""
    from tsfm.kernels.mlstm.chunk import mlstm_chunk

    return mlstm_chunk(*args, split=False, **kwargs)


def _chunk_flops(b, t, h, d, chunk=64):
    # per chunk of L tokens: q k^T and P v (2 L^2 D each, causal half counted whole), q C and k^T v (2 L D^2 each)
    return b * h * t * (4 * chunk * d + 4 * d * d)


def _ssd_make(b, t, h, d, dtype, device, with_state=False):
    x, B, C = (torch.randn(b, t, h, d, device=device) for _ in range(3))
    dt = torch.nn.functional.softplus(torch.randn(b, t, h, device=device) - 1)
    A = torch.rand(h, device=device) + 0.5
    state = torch.randn(b, h, d, d, device=device) if with_state else None
    return [x.to(dtype), dt.to(dtype), A, B.to(dtype), C.to(dtype)], state


def _ssd_triton(*args, **kwargs):
    from tsfm.kernels.ssd.chunk import ssd_chunk

    return ssd_chunk(*args, **kwargs)


def _gated_delta_make(b, t, h, d, dtype, device, with_state=False):
    q, v = torch.randn(b, t, h, d, device=device), torch.randn(b, t, h, d, device=device)
    k = torch.nn.functional.normalize(torch.randn(b, t, h, d, device=device), dim=-1)
    g = torch.nn.functional.logsigmoid(2 * torch.randn(b, t, h, device=device) + 3)
    beta = torch.sigmoid(torch.randn(b, t, h, device=device))
    state = torch.randn(b, h, d, d, device=device) if with_state else None
    return [q.to(dtype), k.to(dtype), v.to(dtype), g.to(dtype), beta.to(dtype)], state


def _gated_delta_triton(*args, **kwargs):
    from tsfm.kernels.gated_delta_rule.chunk import gated_delta_rule_chunk

    return gated_delta_rule_chunk(*args, **kwargs)


def _slstm_make(b, t, h, d, dtype, device, with_state=False):
    x_gates = 2 * torch.randn(b, t, h, 4, d, device=device)
    R = 0.1 * torch.randn(h, 4, d, d, device=device)
    state = None
    if with_state:
        state = (
            torch.tanh(torch.randn(b, h, d, device=device)),
            torch.randn(b, h, d, device=device),
            torch.rand(b, h, d, device=device) + 1,
            torch.randn(b, h, d, device=device),
        )
    return [x_gates.to(dtype), R.to(dtype)], state


def _slstm_triton(*args, **kwargs):
    from tsfm.kernels.slstm.fused import slstm_fused

    return slstm_fused(*args, **kwargs)


OPS = {
    "mlstm": Op(
        name="mlstm",
        make=_mlstm_make,
        triton=_mlstm_triton,
        reference=mlstm_chunkwise,
        spec=mlstm_chunkwise,
        differentiable_state=(True, True, False),
        bytes_fwd=lambda b, t, h, d: b * t * h * (4 * d * 2 + 2 * 2),
        flops_fwd=_chunk_flops,
    ),
    "mlstm_sequential": Op(
        name="mlstm_sequential",
        make=_mlstm_make,
        triton=_mlstm_sequential,
        reference=mlstm_chunkwise,
        spec=mlstm_chunkwise,
        differentiable_state=(True, True, False),
        bytes_fwd=lambda b, t, h, d: b * t * h * (4 * d * 2 + 2 * 2),
        flops_fwd=_chunk_flops,
    ),
    "ssd": Op(
        name="ssd",
        make=_ssd_make,
        triton=_ssd_triton,
        reference=ssd_chunkwise,
        spec=ssd_chunkwise,
        differentiable_state=(True,),
        bytes_fwd=lambda b, t, h, d: b * t * h * (4 * d * 2 + 2),
        flops_fwd=_chunk_flops,
    ),
    "gated_delta_rule": Op(
        name="gated_delta_rule",
        make=_gated_delta_make,
        triton=_gated_delta_triton,
        reference=gated_delta_rule_chunkwise,
        spec=gated_delta_rule_chunkwise,
        differentiable_state=(True,),
        bytes_fwd=lambda b, t, h, d: b * t * h * (4 * d * 2 + 2 * 2),
        # on top of the mLSTM-like part: k k^T, the triangular solve applied to [beta v | beta k], W S
        flops_fwd=lambda b, t, h, d: _chunk_flops(b, t, h, d) + b * h * t * (2 * 64 * d + 2 * 64 * 2 * d + 2 * d * d),
    ),
    "slstm": Op(
        name="slstm",
        make=_slstm_make,
        triton=_slstm_triton,
        reference=slstm_recurrent,
        spec=slstm_recurrent,
        differentiable_state=(True, True, True, False),
        bytes_fwd=lambda b, t, h, d: b * t * h * 5 * d * 2,
        flops_fwd=lambda b, t, h, d: b * t * h * 8 * d * d,
        check_shapes=((2, 50, 4, 64, True), (20, 33, 2, 32, False), (3, 40, 2, 128, True)),
        shapes=(
            (1024, 64, 4, 64),
            (256, 256, 8, 64),
            (64, 1024, 8, 64),
            (128, 512, 4, 128),
            (8, 8192, 8, 64),
            (256, 64, 4, 64),
            (64, 512, 8, 64),
        ),
        reference_max_tokens_per_row=1024,
    ),
}


def check(op: Op, device: str) -> list[dict]:
    """Relative errors of the Triton op against the float64 reference (CPU) in bf16 and fp32."""
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        for b, t, h, d, with_state in op.check_shapes:
            torch.manual_seed(b * t + d)
            args, state = op.make(b, t, h, d, torch.float32, device, with_state=with_state)
            errors = compare(
                op.triton,
                op.spec,
                args,
                state,
                dtype=dtype,
                differentiable_state=op.differentiable_state,
            )
            worst = max(errors.values())
            ok = worst <= TOL[dtype] and not math.isnan(worst)
            rows.append(
                dict(op=op.name, dtype=str(dtype).split(".")[-1], shape=[b, t, h, d], state=with_state, ok=ok)
                | {k: float(f"{e:.2e}") for k, e in errors.items()}
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


DECODE_STEPS = {
    "mlstm": "mlstm_step",
    "ssd": "ssd_step",
    "gated_delta_rule": "gated_delta_rule_step",
    "slstm": "slstm_step",
}
"""Per op: the name of its one-token decode function, in :mod:`tsfm.kernels.ops` (which sends CUDA tensors to our decode
kernels) and in the op's ``tsfm.kernels.<op>.reference`` alike."""


def _decode_steps(op: Op) -> tuple[Callable, Callable]:
    """Our decode step (through :mod:`tsfm.kernels.ops`) and the reference step of ``op``."""
    import importlib

    from tsfm.kernels import ops

    name = DECODE_STEPS[op.name]
    reference = importlib.import_module(f"tsfm.kernels.{op.name.removesuffix('_sequential')}.reference")
    return getattr(ops, name), getattr(reference, name)


def _token(args: list, b: int, t: int, index: int) -> list:
    """The inputs of token ``index``: every ``[B, T, ...]`` tensor sliced at it, the rest (``A``, ``R``) as they are."""
    return [a[:, index] if a.dim() >= 2 and tuple(a.shape[:2]) == (b, t) else a for a in args]


def check_decode(op: Op, device: str, tokens: int = 8) -> list[dict]:
    """Our decode kernels over ``tokens`` consecutive tokens from a random state against the float64 reference step.

    Every token's output and the state after the last one, by relative L2 error, bf16 and fp32 inputs.
    """
    ours_step, ref_step = _decode_steps(op)
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        for b, _, h, d, _ in op.check_shapes:
            torch.manual_seed(b + d)
            args, state = op.make(b, tokens, h, d, torch.float32, "cpu", with_state=True)
            # the reference sees the kernel's (rounded) inputs, as in the sequence check
            ref_args = [a.to(dtype).double() for a in args]
            ref_state = tuple(s.double() for s in state) if isinstance(state, tuple) else state.double()
            dev_args = [a.to(device, dtype if a.is_floating_point() else a.dtype) for a in args]
            dev_state = tuple(s.to(device) for s in state) if isinstance(state, tuple) else state.to(device)
            worst = 0.0
            with torch.no_grad():
                for index in range(tokens):
                    got, dev_state = ours_step(*_token(dev_args, b, tokens, index), dev_state)
                    want, ref_state = ref_step(*_token(ref_args, b, tokens, index), ref_state)
                    worst = max(worst, rel_err(got, want))
            for got_s, want_s in zip(as_tuple(dev_state), as_tuple(ref_state), strict=True):
                worst = max(worst, rel_err(got_s, want_s))
            ok = worst <= TOL[dtype] and not math.isnan(worst)
            rows.append(
                dict(
                    op=f"{op.name}_step",
                    dtype=str(dtype).split(".")[-1],
                    shape=[b, tokens, h, d],
                    ok=ok,
                    worst=float(f"{worst:.2e}"),
                )
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def time_decode(op: Op, shape: tuple[int, int, int, int], device: str) -> dict:
    """Median time of one decode token (bf16 inputs, fp32 state): our decode kernel and the reference step."""
    b, _, h, d = shape
    ours_step, ref_step = _decode_steps(op)
    args, state = op.make(b, 1, h, d, torch.bfloat16, device, with_state=True)
    token = _token(args, b, 1, 0)
    row = dict(op=f"{op.name}_step", shape=list(shape))
    with torch.no_grad():
        row["ours_us"] = _bench(lambda: ours_step(*token, state)) * 1e3
        row["reference_us"] = _bench(lambda: ref_step(*token, state)) * 1e3
    print(json.dumps(row), flush=True)
    return row


def select_shapes(shapes: tuple[tuple[int, int, int, int], ...], choice: str) -> list[tuple[int, int, int, int]]:
    """The op's shapes named by ``--shapes``: all, the first two ("small"), or an explicit ``;``-separated list."""
    if choice == "all":
        return list(shapes)
    if choice == "small":
        return list(shapes[:2])
    wanted = [tuple(int(n) for n in item.split(",")) for item in choice.split(";")]
    return [shape for shape in shapes if shape in wanted]


def _bench(fn: Callable, grad_to_none: list | None = None) -> float:
    import triton

    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median", grad_to_none=grad_to_none)


def time_op(op: Op, form_name: str, form: Callable, shape: tuple[int, int, int, int], device: str) -> dict:
    """Median forward and forward+backward times of one form at one shape, bf16 inputs."""
    b, t, h, d = shape
    torch.manual_seed(0)
    args, _ = op.make(b, t, h, d, torch.bfloat16, device)
    args = [a.requires_grad_() for a in args]
    row = dict(op=op.name, impl=form_name, shape=list(shape))
    try:

        def fwd():
            return form(*args)[0]

        out = fwd()
        dout = torch.randn_like(out)

        def fwd_bwd():
            form(*args)[0].backward(dout)

        with torch.no_grad():
            fwd_ms = _bench(fwd)
        fwd_bwd()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fwd_bwd()
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
        fb_ms = _bench(fwd_bwd, grad_to_none=args)
        row |= dict(fwd_ms=fwd_ms, fwdbwd_ms=fb_ms, peak_mib=peak, tok_s_fwd=b * t / fwd_ms * 1e3)
        row["tok_s_fwdbwd"] = b * t / fb_ms * 1e3
    except Exception as e:  # a failing form is a row of the table, not the end of the run
        row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
    print(json.dumps(row), flush=True)
    return row


def ceilings(device: str) -> tuple[float, float]:
    """Copy bandwidth (bytes read + written per second) and bf16 matrix rate (FLOP/s), measured here."""
    x = torch.empty(2**30, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    ms = _bench(lambda: y.copy_(x))
    bandwidth = 2 * x.numel() / ms * 1e3
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    ms = _bench(lambda: a @ a)
    return bandwidth, 2 * 8192**3 / ms * 1e3


def table(rows: list[dict], ref_rows: dict) -> str:
    lines = [
        "| op | B,T,H,D | impl | fwd ms | fwd+bwd ms | tok/s fwd | tok/s fwd+bwd | peak MiB | floor fwd ms "
        "| floor frac fwd | x ref fwd | x ref fwd+bwd |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        shape = ",".join(map(str, r["shape"]))
        if "error" in r:
            lines.append(f"| {r['op']} | {shape} | {r['impl']} | {r['error'][:60]} |||||||||")
            continue
        ref = ref_rows.get((r["op"], tuple(r["shape"])), {})
        sp_f = ref.get("fwd_ms", float("nan")) / r["fwd_ms"]
        sp_b = ref.get("fwdbwd_ms", float("nan")) / r["fwdbwd_ms"]
        lines.append(
            f"| {r['op']} | {shape} | {r['impl']} | {r['fwd_ms']:.3f} | {r['fwdbwd_ms']:.3f} | {r['tok_s_fwd']:.3g} "
            f"| {r['tok_s_fwdbwd']:.3g} | {r['peak_mib']:.0f} | {r['floor_ms']:.3f} | {r['floor_frac']:.2f} "
            f"| {sp_f:.1f} | {sp_b:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--shapes", default="all", help="all, small (the first two), or B,T,H,D[;B,T,H,D...]")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    parser.add_argument("--no-reference", action="store_true", help="skip timing the PyTorch reference")
    parser.add_argument("--no-check", action="store_true")
    parser.add_argument("--check-ops", default="", help="check only these ops (default: every timed op)")
    parser.add_argument("--reference-ops", default="", help="time the reference of these ops only (default: all)")
    parser.add_argument("--decode", action="store_true", help="also check and time the one-token decode kernels")
    parser.add_argument("--peers", default="", help="folder holding peer_kernels_driver.sh to run after ours")
    opts = parser.parse_args()
    device = "cuda"
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    import triton

    header = f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}"
    print(header, flush=True)
    bandwidth, flop_rate = ceilings(device)
    print(f"copy {bandwidth / 1e12:.2f} TB/s, bf16 matmul {flop_rate / 1e12:.0f} TFLOP/s", flush=True)
    checks, rows, ref_rows, decode_rows = [], [], {}, []
    for name in opts.ops.split(","):
        op = OPS[name]
        if opts.decode and name in DECODE_STEPS:
            checks += check_decode(op, device)
            decode_rows.append(time_decode(op, (256, 1, 8, 64), device))
        if not opts.no_check and (not opts.check_ops or name in opts.check_ops.split(",")):
            checks += check(op, device)
        for shape in select_shapes(op.shapes, opts.shapes):
            row = time_op(op, "triton", op.triton, shape, device)
            floor = max(op.bytes_fwd(*shape) / bandwidth, op.flops_fwd(*shape) / flop_rate) * 1e3
            row |= dict(floor_ms=floor, floor_frac=floor / row.get("fwd_ms", float("inf")))
            rows.append(row)
            wants_reference = not opts.no_reference and (
                not opts.reference_ops or name in opts.reference_ops.split(",")
            )
            if wants_reference and shape[1] <= op.reference_max_tokens_per_row:
                ref = time_op(op, "reference", op.reference, shape, device)
                ref |= dict(floor_ms=floor, floor_frac=floor / ref.get("fwd_ms", float("inf")))
                rows.append(ref)
                if "error" not in ref:
                    ref_rows[(name, shape)] = ref
        torch.cuda.empty_cache()
    with open(out / "kernels.jsonl", "w") as fh:
        for r in checks + rows + decode_rows:
            fh.write(json.dumps(r) + "\n")
    if opts.peers:
        subprocess.run(["bash", str(Path(opts.peers) / "peer_kernels_driver.sh")], check=False)
    failed = [c for c in checks if not c["ok"]]
    check_lines = [
        f"check: {len(checks) - len(failed)}/{len(checks)} within tolerance (bf16 1e-2, fp32 1e-3, rel L2, "
        "outputs + states + all gradients vs float64)"
    ]
    check_lines += [f"  FAILED {json.dumps(c)}" for c in failed]
    decode_lines = [
        f"decode {r['op']} B,H,D={r['shape'][0]},{r['shape'][2]},{r['shape'][3]}: ours {r['ours_us']:.1f} us, "
        f"reference {r['reference_us']:.1f} us per token ({r['reference_us'] / r['ours_us']:.1f}x)"
        for r in decode_rows
    ]
    text = "\n".join(
        [header, *check_lines, *decode_lines, "", table(rows, ref_rows), "", f"elapsed {time.time() - start:.0f} s"]
    )
    (out / "kernels.md").write_text(text + "\n")
    print("\n" + text)


if __name__ == "__main__":
    main()
