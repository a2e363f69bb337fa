"""Registers, spills and shared memory of one of our Triton kernels for sm_90 (H100/H200), compiled on the CPU.

No GPU needed: ``triton.compile`` lowers the kernel for ``GPUTarget("cuda", 90, 32)`` and the ``ptxas`` bundled
with Triton reports what the SM would have to hold (``-v``). The kernels' docstrings quote these numbers when they
choose warps, chunk sizes or dot operands; this is how to reproduce them.

Usage::

    python -m benchmarks.kernel_resources tsfm.kernels.slstm.fused:_slstm_bwd_kernel \\
        --constexpr H=4 D=64 BB=16 BD=64 HAS_INIT=1 HAS_DFINAL=1 PRECISION=tf32 R_STREAM=0 \\
        --bf16 x r dout dx --ints B T --warps 4 8

Pointer arguments are float32 unless named by ``--bf16``; integer scalars are named by ``--ints``. Constexpr
values ``0``/``1`` become booleans, digits integers, anything else a string.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import subprocess
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
SHARED_LIMIT = 232448
"""Bytes of shared memory one block may use on sm_90."""


def _value(text: str) -> bool | int | str:
    if text in ("0", "1"):
        return text == "1"
    return int(text) if text.isdigit() else text


def compile_for_sm90(kernel, constexprs: dict, bf16: set[str], ints: set[str], warps: int, stages: int):
    """The kernel compiled for sm_90 with the given constexprs and argument types."""
    names = list(inspect.signature(kernel.fn).parameters)
    unknown = set(constexprs) - set(names)
    if unknown:
        raise SystemExit(f"--constexpr: {sorted(unknown)} are not parameters of {kernel.fn.__name__}")
    signature = {
        n: "constexpr" if n in constexprs else "i32" if n in ints else "*bf16" if n in bf16 else "*fp32" for n in names
    }
    source = ASTSource(fn=kernel, signature=signature, constexprs={(names.index(k),): v for k, v in constexprs.items()})
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})


def resources(compiled) -> dict:
    """Registers per thread, spill bytes per thread and shared memory of a compiled kernel (``ptxas -v``)."""
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as ptx:
        ptx.write(compiled.asm["ptx"])
        ptx.flush()
        report = subprocess.run(
            [str(PTXAS), "-arch=sm_90a", "-v", ptx.name, "-o", "/dev/null"], capture_output=True, text=True
        ).stderr

    def number(pattern: str) -> int:
        match = re.search(pattern, report)
        if match is None:
            raise RuntimeError(f"ptxas printed no '{pattern}':\n{report}")
        return int(match.group(1))

    return {
        "registers": number(r"Used (\d+) registers"),
        "spill_stores": number(r"(\d+) bytes spill stores"),
        "spill_loads": number(r"(\d+) bytes spill loads"),
        "shared": compiled.metadata.shared,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kernel", help="module:name, e.g. tsfm.kernels.slstm.fused:_slstm_fwd_kernel")
    parser.add_argument("--constexpr", nargs="*", default=[], metavar="NAME=VALUE")
    parser.add_argument("--bf16", nargs="*", default=[], help="pointer arguments that point at bf16")
    parser.add_argument("--ints", nargs="*", default=[], help="integer scalar arguments")
    parser.add_argument("--warps", nargs="+", type=int, default=[4])
    parser.add_argument("--stages", type=int, default=1)
    opts = parser.parse_args()
    module, name = opts.kernel.split(":")
    kernel = getattr(importlib.import_module(module), name)
    constexprs = {k: _value(v) for k, v in (item.split("=", 1) for item in opts.constexpr)}
    print("| warps | registers | spill stores B | spill loads B | shared B |\n|---|---|---|---|---|")
    for warps in opts.warps:
        compiled = compile_for_sm90(kernel, constexprs, set(opts.bf16), set(opts.ints), warps, opts.stages)
        r = resources(compiled)
        over = " (over the limit)" if r["shared"] > SHARED_LIMIT else ""
        print(f"| {warps} | {r['registers']} | {r['spill_stores']} | {r['spill_loads']} | {r['shared']}{over} |")


if __name__ == "__main__":
    main()
