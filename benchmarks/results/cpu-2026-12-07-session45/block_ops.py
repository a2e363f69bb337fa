"""How many operators that run a kernel (views excluded) one synthetic pool refresh costs, by prior block size.

Counted on the CPU with torch.profiler: the operators a GPU would launch a kernel for are the same, so this is the
device-independent part of the forty-fifth session's GPU profile (2,475 kernel launches per training step). One
refresh is what the training pool makes every 4 steps at --pool-size 16384: 1,024 series of 2,816 steps (context
2,048 + horizon 768), with the runs' mix (the default shares plus repeat=0.1).

    PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2026-12-07-session45/block_ops.py
"""

import torch
from torch.profiler import ProfilerActivity, profile

from tsfm.pipelines.data.priors import BLOCK, DEFAULT_PRIOR_MIX, sample_priors

#: Operators that only make a view or read a scalar (no kernel on a GPU).
VIEWS = frozenset(f"aten::{name}" for name in (
    "slice", "select", "view", "unsqueeze", "squeeze", "expand", "real", "imag", "as_strided", "reshape", "t",
    "transpose", "permute", "alias", "narrow", "unbind", "split", "chunk", "detach", "_unsafe_view", "view_as_real",
    "view_as_complex", "empty", "empty_like", "lift_fresh", "resolve_conj", "resolve_neg", "contiguous", "item",
    "_local_scalar_dense", "to", "_to_copy", "squeeze_", "unsqueeze_", "flatten", "view_as", "movedim", "expand_as",
    "split_with_sizes", "result_type", "is_nonzero"))


def outer_operators(prof: profile) -> list:
    """The operators the Python code called (not the ones they call in turn)."""
    return [e for e in prof.events() if e.name.startswith("aten::")
            and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]


torch.set_num_threads(1)
mix = {**DEFAULT_PRIOR_MIX, "repeat": 0.1}
for block in (BLOCK, 1024):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        sample_priors(1024, 2816, torch.Generator().manual_seed(0), mix=mix, block=block)
    operators = outer_operators(prof)
    kernels = [e for e in operators if e.name not in VIEWS]
    print(f"block {block}: one refresh of 1,024 series of 2,816 steps runs {len(operators)} operators, "
          f"{len(kernels)} that are not views ({len(kernels) / 4:.0f} a training step at a refresh every 4 steps)")
