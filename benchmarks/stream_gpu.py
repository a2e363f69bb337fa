"""GPU per-patch stream update, eager vs CUDA graph (issue 15, item 5).

A stream's per-patch update (embed one patch, one ``backbone.step`` per layer: what ``Stream._advance`` does for a
single patch) is a few dozen tiny kernels per layer, so on a GPU it is bound by kernel launches, not arithmetic.
For each model and batch size this opens a state by reading a random 2,048-step context (64 tokens) with
``return_state=True``, then times ``--updates`` per-patch updates (after ``--warmup``) two ways: (a) eager,
``embed`` + ``Forecaster.continue_state`` on one token under ``no_grad``; (b) the update captured in a CUDA graph
and replayed (:class:`tsfm.graphed_step.GraphedPatchStep`, input copy and output clone included). It also checks
that both give the same hidden output after the same updates from the same state, and exits 1 when they differ by
more than ``--rtol`` (relative to the output's largest magnitude). Models: ``recurrent`` (the shipped sLSTM model),
a checkpoint folder of a recurrent backbone, or a backbone spec (a 10M preset with random weights; speed does not
depend on the weights). A Transformer (the shipped ``default``) is refused: its KV-cache state grows every patch and
cannot be graphed in place.
Prints a markdown table; ``--out`` writes the raw rows and the machine as JSON.

    python -m benchmarks.stream_gpu [--models recurrent,xlstm[3:1],mamba2,gdn] [--batch-sizes 1,256,1024]
        [--updates 200] [--warmup 20] [--dtype fp32|bf16] [--out FILE]
    python -m benchmarks.stream_gpu --device cpu --models recurrent --batch-sizes 2 --updates 3 --warmup 1  # eager

Without CUDA it exits with code 2 unless ``--device cpu`` is given (then only the eager path is timed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree
from tqdm import tqdm

CONTEXT_STEPS = 2048
DEFAULT_MODELS = ("recurrent", "xlstm[3:1]", "mamba2", "gdn")
#: Updates compared between eager and graph (from the same opened state, the same patches).
CHECK_UPDATES = 8
RTOL = {"fp32": 1e-3, "bf16": 5e-2}


def build_model(name: str, device: torch.device) -> Any:
    """A built-in name or a checkpoint folder -> the trained model; anything else -> a 10M preset of that backbone
    spec with random weights (seeded)."""
    from tsfm.checkpoint import BUILTIN_MODELS, load_model
    from tsfm.model import Forecaster
    from tsfm.presets import preset_config

    if name in BUILTIN_MODELS or os.path.isdir(name):
        model = load_model(name)
    else:
        torch.manual_seed(0)
        model = Forecaster(preset_config(name, "10M"))
    return model.to(device).eval()


def open_state(model: Any, batch: int, device: torch.device, autocast: Any) -> tuple[torch.Tensor, Any]:
    """The backbone over a random ``CONTEXT_STEPS``-step scaled context -> ``(last hidden [B, d], state)``."""
    from tsfm.patching import patch_tokens

    patch = model.config.patch_size
    context = torch.randn(batch, CONTEXT_STEPS // patch, patch, device=device)
    with torch.no_grad(), autocast():
        hidden, state = model.backbone(model.embed(patch_tokens(context)), return_state=True)
    return hidden[:, -1], state


def random_patches(count: int, batch: int, patch: int, device: torch.device) -> torch.Tensor:
    """``[count, B, P]`` scaled patch values with about 1% NaN (missing steps take the masked path of the token)."""
    values = torch.randn(count, batch, patch, device=device)
    return values.masked_fill(torch.rand_like(values) < 0.01, float("nan"))


def eager_update(model: Any, patch_values: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
    """One patch through the library's eager path (``Stream._advance`` for one patch): ``(hidden [B, d], state)``."""
    from tsfm.patching import patch_tokens

    hidden, state = model.continue_state(model.embed(patch_tokens(patch_values[:, None])), state)
    return hidden[:, 0], state


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_updates(update: Any, patches: torch.Tensor, state: Any, warmup: int, device: torch.device) -> float:
    """Microseconds per update over ``patches[warmup:]`` after ``warmup`` untimed updates, state carried along."""
    for k in range(warmup):
        _, state = update(patches[k], state)
    sync(device)
    start = time.perf_counter()
    for k in range(warmup, len(patches)):
        _, state = update(patches[k], state)
    sync(device)
    return (time.perf_counter() - start) / (len(patches) - warmup) * 1e6


def run_one(name: str, batch: int, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    from tsfm.graphed_step import GraphedPatchStep

    model = build_model(name, device)
    if model.backbone.name == "transformer":
        raise SystemExit(f"error: {name}: the transformer's KV-cache state cannot be graphed; leave it out")
    bf16 = args.dtype == "bf16"

    def autocast() -> contextlib.AbstractContextManager[Any]:
        return torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    def eager(patch_values: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        with torch.no_grad(), autocast():
            return eager_update(model, patch_values, state)

    torch.manual_seed(1)
    _, state = open_state(model, batch, device, autocast)
    patches = random_patches(args.warmup + args.updates, batch, model.config.patch_size, device)
    row: dict[str, Any] = {
        "model": name, "backbone": model.config.backbone, "params": model.num_parameters(),
        "d_model": model.config.d_model, "batch": batch, "dtype": args.dtype, "device": str(device),
        "updates": args.updates, "warmup": args.warmup,
    }
    row["eager_us"] = time_updates(eager, patches, state, args.warmup, device)
    row["graph_us"] = row["max_abs_diff"] = row["rel_diff"] = row["state_max_abs_diff"] = None
    if device.type == "cuda":
        step = GraphedPatchStep(model, state, autocast_dtype=torch.bfloat16 if bf16 else None)
        row["graph_us"] = time_updates(step, patches, state, args.warmup, device)
        check = patches[:CHECK_UPDATES]
        expected, eager_state = eager(check[0], state)
        got, graph_state = step(check[0], state)  # a state other than step.state is copied in: restart from it
        for patch_values in check[1:]:
            expected, eager_state = eager(patch_values, eager_state)
            got, graph_state = step(patch_values, graph_state)
        diff = float((expected.float() - got.float()).abs().max())
        row["max_abs_diff"] = diff
        row["rel_diff"] = diff / max(float(expected.float().abs().max()), 1e-12)
        row["state_max_abs_diff"] = max(float((a.float() - b.float()).abs().max()) for a, b in zip(
            pytree.tree_leaves(eager_state), pytree.tree_leaves(graph_state), strict=True))
    row["eager_us_per_series"] = row["eager_us"] / batch
    row["graph_us_per_series"] = None if row["graph_us"] is None else row["graph_us"] / batch
    row["speedup"] = None if row["graph_us"] is None else row["eager_us"] / row["graph_us"]
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def machine(device: torch.device) -> dict[str, Any]:
    info = {"python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine(),
            "cpus": os.cpu_count(), "device": str(device)}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    return info


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="comma-separated: recurrent, checkpoint folders of recurrent backbones, or backbone "
                             "specs (10M preset, random weights)")
    parser.add_argument("--batch-sizes", default="1,256,1024", help="comma-separated streams per update")
    parser.add_argument("--updates", type=int, default=200, help="timed per-patch updates")
    parser.add_argument("--warmup", type=int, default=20, help="untimed updates before timing")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="bf16: CUDA autocast")
    parser.add_argument("--device", default=None, help="cuda (default) or cpu (eager only, for testing)")
    parser.add_argument("--rtol", type=float, default=None, help="eager vs graph tolerance (default by dtype)")
    parser.add_argument("--out", type=Path, default=None, help="raw rows and machine info as JSON")
    args = parser.parse_args(argv)
    if args.device is None and not torch.cuda.is_available():
        print("error: no CUDA device: this benchmark times CUDA graphs; pass --device cpu to time the eager path "
              "only", file=sys.stderr)
        return 2
    device = torch.device(args.device or "cuda")
    if args.dtype == "bf16" and device.type != "cuda":
        parser.error("--dtype bf16 needs a CUDA device")
    if args.updates < 1 or args.warmup < 0:
        parser.error("--updates must be >= 1 and --warmup >= 0")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    batches = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    rtol = RTOL[args.dtype] if args.rtol is None else args.rtol

    rows = []
    for name, batch in tqdm([(m, b) for m in models for b in batches], desc="model x batch", file=sys.stderr):
        rows.append(run_one(name, batch, args, device))
    info = machine(device)
    print(f"\nper-patch stream update, {args.dtype}, {args.updates} updates after {args.warmup} warm-up, "
          f"{info.get('gpu', info['device'])}, torch {info['torch']}")
    print("| model | backbone | params | batch | eager µs/update | graph µs/update | eager µs/series | "
          "graph µs/series | speedup | max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['backbone']} | {r['params'] / 1e6:.1f}M | {r['batch']} | {r['eager_us']:.0f} | "
              f"{fmt(r['graph_us'], '.0f')} | {r['eager_us_per_series']:.2f} | {fmt(r['graph_us_per_series'], '.2f')}"
              f" | {fmt(r['speedup'], '.1f')}{'' if r['speedup'] is None else 'x'} | {fmt(r['max_abs_diff'], '.1e')} |")
    if args.out is not None:
        args.out.write_text(json.dumps({"machine": info, "args": vars(args) | {"out": str(args.out)}, "rows": rows},
                                       indent=1) + "\n")
    bad = [r for r in rows if r["rel_diff"] is not None and r["rel_diff"] > rtol]
    for r in bad:
        print(f"error: {r['model']} batch {r['batch']}: graph and eager hidden outputs differ by {r['rel_diff']:.2e} "
              f"relative (max abs {r['max_abs_diff']:.2e}) > {rtol}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
