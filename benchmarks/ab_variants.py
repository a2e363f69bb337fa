"""A/B of kernel variants on the GPU in one process: the same check and timing as ``bench_kernels.py``, with a
module setting flipped between runs. Used for the decisions recorded in RESULTS.md.

Usage (repository root, on the GPU machine; one mode per process, so that a crash in one variant cannot hide
another's numbers)::

    python -m benchmarks.ab_variants slstm-warps            # sLSTM at 4 vs 8 warps (check at the default)
    python -m benchmarks.ab_variants bf16-dots mlstm         # bf16 vs float32 tl.dot operands (check with bf16)
    python -m benchmarks.ab_variants mlstm-sequential 2,300,4,64[,fwd]   # the sequential mLSTM kernels, checked

Prints a table last and writes ``ab_<mode>.jsonl`` to ``$OUT`` (default ``/tmp``).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from pathlib import Path

import torch

from benchmarks import bench_kernels as KB

BF16_DOT_SWITCHES = {"mlstm": "tsfm.kernels.mlstm.chunk_common"}
"""Per op, the module whose ``DOT_BF16_BY_DEFAULT`` switches its bf16 ``tl.dot`` operands (only mLSTM has them)."""


def _time(label: str, name: str, shapes) -> list[dict]:
    op = KB.OPS[name]
    return [KB.time_op(op, label, op.triton, tuple(shape), "cuda") for shape in shapes]


def slstm_warps() -> list[dict]:
    from tsfm.kernels.slstm import fused

    failed = [c for c in KB.check(KB.OPS["slstm"], "cuda") if not c["ok"]]
    print("slstm check failures:", failed, flush=True)
    shapes = [(1024, 64, 4, 64), (64, 512, 8, 64), (256, 64, 4, 64), (128, 512, 4, 128), (256, 256, 8, 64)]
    default, rows = fused._num_warps, []
    for warps in (4, 8):
        fused._num_warps = lambda bd, warps=warps: warps
        rows += _time(f"{warps} warps", "slstm", shapes)
    fused._num_warps = default
    return rows


def bf16_dots(name: str) -> list[dict]:
    module = importlib.import_module(BF16_DOT_SWITCHES[name])
    module.DOT_BF16_BY_DEFAULT = True
    checks = KB.check(KB.OPS[name], "cuda")
    worst = [(c["dtype"], c["shape"], c["ok"], max(v for v in c.values() if isinstance(v, float))) for c in checks]
    print(name, "check with bf16 operands:", worst, flush=True)
    rows = _time("bf16 operands", name, KB.SHAPES)
    module.DOT_BF16_BY_DEFAULT = False
    return rows + _time("float32 operands", name, KB.SHAPES)


def mlstm_sequential(spec: str) -> list[dict]:
    """The sequential mLSTM kernels (``split=False``) at one shape against float64: all gradients, or the forward."""
    from tsfm.kernels.mlstm.chunk import mlstm_chunk
    from tsfm.kernels.mlstm.reference import mlstm_chunkwise

    *dims, fwd_only = spec.split(",") + ([] if spec.endswith(",fwd") else [""])
    b, t, h, d = (int(x) for x in dims)
    torch.manual_seed(0)
    args, _ = KB.OPS["mlstm"].make(b, t, h, d, torch.float32, "cuda")
    form = functools.partial(mlstm_chunk, split=False)
    if fwd_only:
        out = form(*(a.bfloat16() for a in args))[0].double().cpu()
        want = mlstm_chunkwise(*(a.bfloat16().double().cpu() for a in args))[0]
        errors = {"out": ((out - want).norm() / want.norm()).item()}
    else:
        errors = KB.compare(
            form, mlstm_chunkwise, args, None, dtype=torch.bfloat16, differentiable_state=(True, True, False)
        )
    row = dict(op="mlstm", impl="sequential", shape=[b, t, h, d], worst=max(errors.values()), **errors)
    print(json.dumps(row), flush=True)
    return [row]


def main() -> None:
    mode, *rest = sys.argv[1:]
    rows = {"slstm-warps": slstm_warps, "bf16-dots": bf16_dots, "mlstm-sequential": mlstm_sequential}[mode](*rest)
    out = Path(os.environ.get("OUT", "/tmp"))
    with open(out / f"ab_{mode}.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    print("\n| op | shape | variant | fwd ms | fwd+bwd ms |\n|---|---|---|---|---|")
    for r in rows:
        if "fwd_ms" in r:
            print(f"| {r['op']} | {r['shape']} | {r['impl']} | {r['fwd_ms']:.3f} | {r['fwdbwd_ms']:.3f} |")


if __name__ == "__main__":
    main()
