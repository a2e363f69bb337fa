"""Where the time of one mixer op goes: GPU time per kernel of one forward + backward, from ``torch.profiler``.

``benchmarks/bench_kernels.py`` says how fast an op is; this says why: which launches (ours, and the PyTorch glue
around them: casts, copies, einsums) take the time. Used to explain the gaps to the peers in RESULTS.md.

Usage (repository root, on the GPU machine)::

    python -m benchmarks.profile_op --ops slstm,mlstm --shapes "1024,64,4,64;64,512,8,64" [--out $OUT]

Prints, per (op, shape), the kernels sorted by GPU time (microseconds, averaged over ``--repeat`` runs after a
warm-up) and writes the same to ``profile.md`` in ``--out``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.bench_kernels import OPS


def profile_op(name: str, shape: tuple[int, int, int, int], repeat: int) -> str:
    """Markdown table of GPU time per kernel for one forward + backward of ``name`` at ``shape``, bf16 inputs."""
    op = OPS[name]
    b, t, h, d = shape
    torch.manual_seed(0)
    args, _ = op.make(b, t, h, d, torch.bfloat16, "cuda")
    args = [a.requires_grad_() for a in args]

    def fwd_bwd() -> None:
        out = op.triton(*args)[0]
        out.backward(torch.ones_like(out))
        for a in args:
            a.grad = None

    for _ in range(3):
        fwd_bwd()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeat):
            fwd_bwd()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    events.sort(key=lambda e: e.device_time_total, reverse=True)
    total = sum(e.device_time_total for e in events) / repeat
    lines = [
        f"### {name} {b},{t},{h},{d}: {total:.0f} us of GPU time per forward + backward",
        "",
        "| kernel | calls | us | share |",
        "|---|---|---|---|",
    ]
    for e in events[:15]:
        us = e.device_time_total / repeat
        lines.append(f"| {e.key[:90]} | {e.count // repeat} | {us:.0f} | {us / total:.0%} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", default="slstm")
    parser.add_argument("--shapes", default="1024,64,4,64", help="B,T,H,D[;B,T,H,D...]")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    opts = parser.parse_args()
    shapes = [tuple(int(n) for n in item.split(",")) for item in opts.shapes.split(";")]
    sections = []
    for name in opts.ops.split(","):
        for shape in shapes:
            sections.append(profile_op(name, shape, opts.repeat))
            print(sections[-1] + "\n", flush=True)
            torch.cuda.empty_cache()
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile.md").write_text("\n\n".join(sections) + "\n")


if __name__ == "__main__":
    main()
