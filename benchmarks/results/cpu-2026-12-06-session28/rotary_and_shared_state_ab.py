"""In-process A/B of the two CPU changes, interleaved: rotary (old concat form vs new) and the shared state."""
import time, numpy as np, torch
torch.set_num_threads(2)
import tsfm.backbones.transformer as tr
from tsfm import load_model, predict
from benchmarks.predict_cpu import real_windows
new_rotary = tr.rotary
def old_rotary(x, offset, base=tr.ROPE_BASE):
    length, dim = x.shape[-2], x.shape[-1]
    inv_freq = base ** (-torch.arange(0, dim, 2, device=x.device, dtype=torch.float64) / dim)
    positions = torch.arange(offset, offset + length, device=x.device, dtype=torch.float64)
    angles = torch.outer(positions, inv_freq)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
data = real_windows(1000)
m = load_model("default")
predict(list(data[:256]), 48, model=m, show_progress=False)
variants = {"old rotary, copied state": (old_rotary, False), "new rotary, copied state": (new_rotary, False),
            "new rotary, shared state": (new_rotary, True)}
times = {k: [] for k in variants}
for rep in range(5):
    for name, (rot, shared) in variants.items():
        tr.rotary = rot
        m.backbone.reads_broadcast_state = shared
        t = time.perf_counter(); predict(list(data), 48, model=m, show_progress=False); times[name].append(time.perf_counter() - t)
for name, ts in times.items():
    print(f"{name}: median {1000 / np.median(ts):.1f} series/s; runs {[round(1000 / t, 1) for t in ts]}")
