"""Where a training run's step time goes: ``torch.profiler`` over a few steps of the real run, summarised.

Why: a run alone on an H100 made 11-12 steps/s while the GPU was busy about 60% of the time (``nvidia-smi dmon``
during the forty-fourth session's calls), so something outside the model's kernels holds each step back: host work
(Python, Lightning, launching the data path's and the model's kernels) or synchronising calls that make the host
wait for the GPU and then leave the GPU waiting for the host. A profile of the model's step alone
(``benchmarks/profile_train_step.py``) cannot show either; this profiles the run's own loop (sampler, synthetic pool
refresh, compiled loss, optimizer, Lightning's callbacks and logging) at a step the caller picks, after the
compile's warm-up, and writes ``profile.md``:

- wall time per step, the GPU's busy time per step (the union of its kernels' intervals) and its share;
- the host's time in synchronising CUDA calls, and the operators that made them;
- the operators with the most host time of their own, and the kernels with the most GPU time.

``tsfm train --profile-steps FIRST:COUNT`` attaches it; it changes nothing the run computes (not a run setting, so a
resumed run may add it).

Two things the forty-fifth session's first profile taught. The GPU's timeline also holds each ``record_function``
range the host opened (``Optimizer.step#AdamW.step`` spans the whole step), which is no kernel: counted as one, the
GPU looked busy 100% of the time; only kernels count now. And PyTorch's profiler leaves CUPTI attached when it stops
unless ``TEARDOWN_CUPTI=1`` (pytorch/pytorch#144455), which slowed every later step of that call by 14% (12.0 steps/s
before the profile, 10.3 after, 11.9-12.3 in the next calls); the profiler here sets it, unless the caller did.
"""

from __future__ import annotations

import os
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

#: CUDA runtime calls that block the host until the GPU has caught up (a device-to-host copy of a result waits too).
SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
                        "cudaMemcpyAsync"})
#: The most steps one profile may cover: its trace lives in host memory until the summary is written.
MAX_PROFILED_STEPS = 200


def parse_profile_steps(text: str) -> tuple[int, int]:
    """``"FIRST:COUNT"`` -> ``(first, count)``; raises ``ValueError`` naming the problem."""
    parts = text.split(":")
    if len(parts) != 2 or not all(part.strip().isdigit() for part in parts):
        raise ValueError(f"expected FIRST:COUNT with two whole numbers (e.g. 500:20), got {text!r}")
    first, count = int(parts[0]), int(parts[1])
    if not 1 <= count <= MAX_PROFILED_STEPS:
        raise ValueError(f"COUNT must be between 1 and {MAX_PROFILED_STEPS}, got {count}")
    return first, count


class StepProfiler(L.Callback):
    """Profiles ``count`` optimizer steps from step ``first`` (or from the resume point, if later) and writes
    ``out/profile.md``; a run that ends first writes what it profiled."""

    def __init__(self, first: int, count: int, out: str | Path) -> None:
        self.first, self.count, self.out = first, count, Path(out)
        self._profiler: profile | None = None
        self._started_at = 0
        self._clock = 0.0
        self.done = False

    def on_train_batch_start(self, trainer: L.Trainer, module: L.LightningModule, *args: Any) -> None:
        if self.done or self._profiler is not None or trainer.global_step < self.first:
            return
        activities = [ProfilerActivity.CPU]
        if module.device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
            os.environ.setdefault("TEARDOWN_CUPTI", "1")  # detach CUPTI when the profile ends (module docstring)
            torch.cuda.synchronize(module.device)
        self._profiler = profile(activities=activities)
        self._profiler.__enter__()
        self._started_at, self._clock = trainer.global_step, time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, *args: Any) -> None:
        if self._profiler is not None and trainer.global_step - self._started_at >= self.count:
            self._finish(trainer, module)

    def on_train_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if self._profiler is not None:
            self._finish(trainer, module)

    def _finish(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if module.device.type == "cuda":
            torch.cuda.synchronize(module.device)
        wall = time.perf_counter() - self._clock
        profiler, self._profiler = self._profiler, None
        profiler.__exit__(None, None, None)
        steps = trainer.global_step - self._started_at
        self.done = True
        if steps < 1:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "profile.md").write_text(summarise(profiler, wall, steps, self._started_at))


def summarise(profiler: profile, wall_seconds: float, steps: int, first_step: int, top: int = 15) -> str:
    """The markdown summary of one profile (see the module docstring)."""
    events = list(profiler.events())
    kernels = gpu_kernels(events)
    busy_us = _union_us([(e.time_range.start, e.time_range.end) for e in kernels])
    wall_ms = wall_seconds * 1e3 / steps
    syncs = [e for e in events if e.device_type == DeviceType.CPU and e.name in SYNC_CALLS]
    sync_ms = sum(e.cpu_time_total for e in syncs) / 1e3 / steps
    callers: dict[str, list[float]] = defaultdict(list)
    for event in syncs:
        callers[f"{_outermost_operator(event)} -> {event.name}"].append(event.cpu_time_total / 1e3)
    lines = [
        f"# Where the step time went: steps {first_step}-{first_step + steps - 1} ({steps} steps, torch.profiler)",
        "",
        "| measure | per step |",
        "|---|--:|",
        f"| wall | {wall_ms:.2f} ms ({1e3 / wall_ms:.2f} steps/s) |",
    ]
    if kernels:
        gpu_ms = busy_us / 1e3 / steps
        lines.append(f"| GPU busy (union of kernel intervals) | {gpu_ms:.2f} ms ({gpu_ms / wall_ms:.0%} of wall) |")
        lines.append(f"| kernels launched | {len(kernels) / steps:.0f} |")
    else:
        lines.append("| GPU busy | no GPU in this run |")
    lines += [f"| host in synchronising CUDA calls | {sync_ms:.2f} ms ({len(syncs) / steps:.1f} calls) |", ""]
    if callers:
        lines += ["## Synchronising calls by the operator that made them", "",
                  "| operator -> call | calls per step | ms per step |", "|---|--:|--:|"]
        for caller, times in sorted(callers.items(), key=lambda item: -sum(item[1])):
            lines.append(f"| `{caller}` | {len(times) / steps:.2f} | {sum(times) / steps:.3f} |")
        lines.append("")
    lines += ["## Host time of their own (top operators)", "", "```",
              profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=top), "```", ""]
    if kernels:
        totals: Counter[str] = Counter()
        for kernel in kernels:
            totals[kernel.name] += kernel.time_range.end - kernel.time_range.start
        lines += ["## GPU time by kernel (top)", "", "| kernel | ms per step |", "|---|--:|"]
        lines += [f"| `{name[:100]}` | {us / 1e3 / steps:.3f} |" for name, us in totals.most_common(top)]
        lines.append("")
    return "\n".join(lines)


def gpu_kernels(events: list[Any]) -> list[Any]:
    """The events that are GPU work: not the ranges ``record_function`` marks on the GPU's timeline (user
    annotations such as ``Optimizer.step#AdamW.step``, which span whole steps and launch nothing)."""
    return [e for e in events if e.device_type == DeviceType.CUDA and not e.is_user_annotation]


def _union_us(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of ``[start, end)`` intervals (kernels of several streams may overlap)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _outermost_operator(event: Any) -> str:
    """The outermost ``aten::`` operator above a runtime call (what the Python code called), or the call's own
    parent's name when no operator encloses it."""
    found, parent = None, event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            found = parent.name
        parent = parent.cpu_parent
    if found is not None:
        return found
    return event.cpu_parent.name if event.cpu_parent is not None else "(none)"
