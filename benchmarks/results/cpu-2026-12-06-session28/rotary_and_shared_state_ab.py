"""In-process A/B of two CPU changes, interleaved over five rounds on the same 1,000 windows and model: RoPE's old
concatenation form against the new one, and (with the patch that added ``reads_broadcast_state``, not kept) the
batch sharing the missing patches' state as a broadcast view. Without that patch the third variant equals the
second. Run from the repository root: ``PYTHONPATH=. python benchmarks/results/cpu-2026-12-06-session28/
rotary_and_shared_state_ab.py``."""

import time

import numpy as np
import torch

import tsfm.backbones.transformer as transformer
from benchmarks.predict_cpu import real_windows
from tsfm import load_model, predict


def old_rotary(x: torch.Tensor, offset: int, base: float = transformer.ROPE_BASE) -> torch.Tensor:
    """RoPE as it was before the twenty-eighth session."""
    length, dim = x.shape[-2], x.shape[-1]
    inv_freq = base ** (-torch.arange(0, dim, 2, device=x.device, dtype=torch.float64) / dim)
    positions = torch.arange(offset, offset + length, device=x.device, dtype=torch.float64)
    angles = torch.outer(positions, inv_freq)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


torch.set_num_threads(2)
new_rotary = transformer.rotary
data = list(real_windows(1000))
model = load_model("default")
predict(data[:256], 48, model=model, show_progress=False)  # warm-up
variants = {"old rotary, copied state": (old_rotary, False), "new rotary, copied state": (new_rotary, False),
            "new rotary, shared state": (new_rotary, True)}
times: dict[str, list[float]] = {name: [] for name in variants}
for _ in range(5):
    for name, (rotary, shared) in variants.items():
        transformer.rotary = rotary
        model.backbone.reads_broadcast_state = shared
        start = time.perf_counter()
        predict(data, 48, model=model, show_progress=False)
        times[name].append(time.perf_counter() - start)
for name, seconds in times.items():
    print(f"{name}: median {1000 / np.median(seconds):.1f} series/s; runs {[round(1000 / s, 1) for s in seconds]}")
