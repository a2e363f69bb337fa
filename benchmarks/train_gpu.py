"""End-to-end training speed on a GPU: optimizer steps per second of the full Forecaster, Triton vs reference ops.

For each backbone at each preset (default 10M and 80M): bf16 autocast, fused AdamW, a batch of ``--batch-size``
windows (default 256) of ``--context-length`` steps (default 2,048) and ``--horizon-patches`` masked future patches
(default 24), random-walk data (speed does not depend on values). The recurrent backbones run on our Triton kernels;
``--reference`` also times the PyTorch reference ops (``tsfm.kernels.ops.reference_kernels``), ``--compile`` the
step under ``torch.compile`` (our ops stay opaque to it); the Transformer runs PyTorch's SDPA (``ops`` reads
``sdpa``). Prints a table last and writes ``train_gpu.md`` / ``train_gpu.jsonl`` under ``--out`` (the JSONL row by
row, so a call cut short keeps what it measured).

    PYTHONUNBUFFERED=1 python -m benchmarks.train_gpu [--steps 20] [--specs xlstm[3:1],mamba2] [--compile] [--out $OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from pathlib import Path

import torch

from tsfm.backbones.registry import parse_backbone_spec
from tsfm.cli import split_specs
from tsfm.kernels.ops import reference_kernels
from tsfm.model import Forecaster
from tsfm.presets import preset_config

SPECS = ("xlstm[3:1]", "xlstm[1:0]", "mamba2", "gdn", "gdn[neg_eigval]", "transformer")


def has_triton_ops(spec: str) -> bool:
    """Every backbone but the Transformer (PyTorch's SDPA) runs its sequence mixer on our Triton kernels."""
    return parse_backbone_spec(spec)[0] != "transformer"


def ops_label(spec: str, reference: bool, compile: bool) -> str:
    """What runs the sequence mixer (our Triton kernels, their PyTorch reference, or the Transformer's SDPA), and
    whether the rest of the step was compiled."""
    ops = "sdpa" if not has_triton_ops(spec) else "reference" if reference else "triton"
    return ops + (" + compile" if compile else "")


def time_training(spec: str, preset: str, *, reference: bool, steps: int, batch_size: int, context_length: int,
                  horizon_patches: int, compile: bool = False) -> dict:
    torch.manual_seed(0)
    config = preset_config(spec, preset, context_length=max(2048, context_length),
                           train_horizon_patches=horizon_patches)
    model = Forecaster(config).cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    context = torch.randn(batch_size, context_length, device="cuda").cumsum(-1)
    target = torch.randn(batch_size, 32 * horizon_patches, device="cuda").cumsum(-1) + context[:, -1:]
    hidden = torch.rand(batch_size, context_length // 32, device="cuda") < 0.15
    mode = reference_kernels() if reference else contextlib.nullcontext()
    loss_fn = torch.compile(model.training_loss) if compile else model.training_loss

    def step() -> float:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(context, target, hidden_patches=hidden)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    with mode:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        for _ in range(steps):
            loss = step()
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {"spec": spec, "preset": preset, "ops": ops_label(spec, reference, compile),
            "params": model.num_parameters(), "batch_size": batch_size, "context_length": context_length,
            "horizon_patches": horizon_patches, "steps_per_s": steps / seconds, "ms_per_step": 1e3 * seconds / steps,
            "windows_per_s": steps * batch_size / seconds, "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
            "final_loss": float(loss)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--context-length", type=int, default=2048)
    parser.add_argument("--horizon-patches", type=int, default=24)
    parser.add_argument("--reference", action="store_true", help="also time the PyTorch reference ops")
    parser.add_argument("--compile", action="store_true", help="also time under torch.compile")
    parser.add_argument("--presets", default="10M,80M")
    parser.add_argument("--specs", default=",".join(SPECS),
                        help="backbones to time, comma-separated (commas inside brackets stay: xlstm[3:1,conv])")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    args = parser.parse_args()
    rows = []
    for preset in args.presets.split(","):
        for spec in split_specs(args.specs):
            variants = [(False, False)]  # (reference ops, compile); ops_label names the Transformer's SDPA
            if args.reference and has_triton_ops(spec):
                variants.append((True, False))
            if args.compile:
                variants.append((False, True))
            for reference, compile in variants:
                try:
                    row = time_training(spec, preset, reference=reference, steps=args.steps,
                                        batch_size=args.batch_size, context_length=args.context_length,
                                        horizon_patches=args.horizon_patches, compile=compile)
                except Exception as err:  # a failing backbone must not hide the others' numbers
                    row = {"spec": spec, "preset": preset, "ops": ops_label(spec, reference, compile),
                           "error": f"{type(err).__name__}: {str(err)[:200]}"}
                rows.append(row)
                print(json.dumps(row), flush=True)
                with open(Path(args.out) / "train_gpu.jsonl", "a") as f:
                    f.write(json.dumps(row) + "\n")
    lines = ["| backbone | preset | ops | params | ms/step | windows/s | peak GiB |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['spec']} | {r['preset']} | {r['ops']} | | error: {r['error'][:60]} | | |")
            continue
        lines.append(f"| {r['spec']} | {r['preset']} | {r['ops']} | {r['params']:,} | {r['ms_per_step']:.1f} "
                     f"| {r['windows_per_s']:.0f} | {r['peak_gib']:.1f} |")
    table = "\n".join(lines)
    (Path(args.out) / "train_gpu.md").write_text(table + "\n")
    print(f"\ntorch {torch.__version__}, {torch.cuda.get_device_name()}, batch {args.batch_size}, context "
          f"{args.context_length} + {args.horizon_patches} patches, bf16 autocast")
    print(table)


if __name__ == "__main__":
    main()
