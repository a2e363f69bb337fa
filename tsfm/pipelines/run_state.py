"""A training run's resume state made small enough to move between machines, and made whole again.

Why: a run's ``checkpoints/last.ckpt`` holds float32 weights and both AdamW moments, three times the weights' size
(117 MiB for the 10M Transformer; packed: 39 MiB). Where what a machine can send back or take in is capped (this
project's GPU calls: 64 MiB in, 16 MiB a file out), that checkpoint cannot cross, and a run could only go on from
its exported weights with a fresh optimizer and a new schedule (``--init-from``), which restarts the learning rate.
A packed run keeps its schedule: it goes on at its step, its learning rate and its data stream.

What is kept and what is given up (:func:`pack_run`):

- the weights, in bfloat16 (a one-off rounding of about 0.2% of each weight, smaller than one optimizer step at
  the rates a run trains at; the shipped checkpoints are bfloat16 too);
- AdamW's second moment (the per-weight step size), in bfloat16; without it a resumed run would take its first steps
  at full size on an optimizer that has seen no gradient, which is what a warm-up exists to avoid;
- AdamW's first moment is dropped (``keep_momentum=False``): it starts again at zero and refills in about ten steps
  (``beta1 = 0.9``), a short dip in step size; ``keep_momentum=True`` keeps it in bfloat16 where there is room;
- everything else as it was: step, schedule, loop counters, call budget, the run's accumulated seconds, its
  settings (so a resume with other settings is still refused), and its ``logs/version_*/metrics.csv``;
- the best-by-validation checkpoint is not carried (its weights would double the size): the resumed run chooses its
  exported weights among the validations after the resume.

The weights and moments go into safetensors shards of at most ``max_shard_bytes`` each; the rest into
``state.pt``. :func:`unpack_run` writes ``checkpoints/last.ckpt`` and the logs back into a run folder, where
``tsfm train`` with the run's settings resumes it. Measured (``benchmarks/RESULTS.md``, forty-second session): a
packed resume moves a run's validation loss by an eighth of what a change of seed does.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from tsfm.checkpoint import MAX_SHARD_BYTES, split_into_shards

STATE_FILE = "state.pt"
MANIFEST_FILE = "manifest.json"
SHARD_PATTERN = "tensors-{index:05d}-of-{count:05d}.safetensors"
_KEPT_MOMENT = "exp_avg_sq"
_DROPPED_MOMENT = "exp_avg"


class RunStateError(ValueError):
    """A run folder with nothing to pack, or a pack that is not whole."""


def pack_run(run_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, keep_momentum: bool = False,
             max_shard_bytes: int = MAX_SHARD_BYTES) -> Path:
    """Pack ``run_dir/checkpoints/last.ckpt`` and the run's logs into ``out_dir`` (see the module docstring).

    Returns ``out_dir``; its ``manifest.json`` says what was packed and how (sizes, dtypes, the step)."""
    run = Path(run_dir)
    last = run / "checkpoints" / "last.ckpt"
    if not last.is_file():
        raise RunStateError(f"{last} not found: nothing to pack (a run writes it every --checkpoint-every steps)")
    checkpoint = torch.load(last, map_location="cpu", weights_only=False)
    tensors: dict[str, torch.Tensor] = {}
    for name, value in checkpoint.pop("state_dict").items():
        tensors[f"weights/{name}"] = _bf16(value)
    moments = [_KEPT_MOMENT, _DROPPED_MOMENT] if keep_momentum else [_KEPT_MOMENT]
    for o, optimizer in enumerate(checkpoint["optimizer_states"]):
        for index, state in optimizer["state"].items():
            for moment in (_KEPT_MOMENT, _DROPPED_MOMENT):
                value = state.pop(moment)
                if moment in moments:
                    tensors[f"{moment}/{o}/{index}"] = _bf16(value)
    checkpoint["callbacks"] = {key: value for key, value in checkpoint["callbacks"].items()
                               if not key.startswith("ModelCheckpoint")}
    logs = {str(path.relative_to(run)): path.read_text() for path in sorted(run.glob("logs/version_*/metrics.csv"))}

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("tensors-*-of-*.safetensors"), out / STATE_FILE, out / MANIFEST_FILE]:
        stale.unlink(missing_ok=True)  # an earlier pack here: its shards would not match this manifest
    shards = split_into_shards(tensors, max_shard_bytes)
    names = [SHARD_PATTERN.format(index=i, count=len(shards)) for i in range(1, len(shards) + 1)]
    for name, shard in zip(names, shards, strict=True):
        save_file(shard, str(out / name))
    torch.save({"checkpoint": checkpoint, "logs": logs}, out / STATE_FILE)
    manifest = {"global_step": checkpoint["global_step"], "shards": names, "moments": moments,
                "dtype": "bfloat16", "tensor_bytes": sum(t.numel() * t.element_size() for t in tensors.values())}
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return out


def unpack_run(pack_dir: str | os.PathLike[str], run_dir: str | os.PathLike[str]) -> Path:
    """Write a packed run back into ``run_dir`` (``checkpoints/last.ckpt`` and its logs) for ``tsfm train`` to resume;
    refuses a ``run_dir`` that already holds a checkpoint (that run would be overwritten). Returns ``last.ckpt``."""
    pack, run = Path(pack_dir), Path(run_dir)
    manifest_path = pack / MANIFEST_FILE
    if not manifest_path.is_file():
        raise RunStateError(f"{manifest_path} not found: {pack} is not a packed run")
    manifest = json.loads(manifest_path.read_text())
    missing = [name for name in [*manifest["shards"], STATE_FILE] if not (pack / name).is_file()]
    if missing:
        raise RunStateError(f"{pack} is missing {', '.join(missing)}: the pack is not whole")
    last = run / "checkpoints" / "last.ckpt"
    if last.exists():
        raise RunStateError(f"{last} exists: unpack into a run folder without a checkpoint")
    tensors: dict[str, torch.Tensor] = {}
    for name in manifest["shards"]:
        tensors.update(load_file(str(pack / name)))
    saved = torch.load(pack / STATE_FILE, map_location="cpu", weights_only=False)
    checkpoint: dict[str, Any] = saved["checkpoint"]
    checkpoint["state_dict"] = {key.removeprefix("weights/"): _float32(value)
                                for key, value in tensors.items() if key.startswith("weights/")}
    for o, optimizer in enumerate(checkpoint["optimizer_states"]):
        for index, state in optimizer["state"].items():
            kept = _float32(tensors[f"{_KEPT_MOMENT}/{o}/{index}"])
            state[_KEPT_MOMENT] = kept
            momentum = tensors.get(f"{_DROPPED_MOMENT}/{o}/{index}")
            state[_DROPPED_MOMENT] = torch.zeros_like(kept) if momentum is None else _float32(momentum)
    last.parent.mkdir(parents=True, exist_ok=True)
    for relative, text in saved["logs"].items():
        (run / relative).parent.mkdir(parents=True, exist_ok=True)
        (run / relative).write_text(text)
    partial = last.with_suffix(".partial")
    torch.save(checkpoint, partial)
    shutil.move(partial, last)
    return last


def _bf16(value: torch.Tensor) -> torch.Tensor:
    """A tensor as contiguous bfloat16 on the CPU (floating tensors only; anything else as it is)."""
    value = value.detach().cpu()
    return (value.to(torch.bfloat16) if value.is_floating_point() else value).contiguous()


def _float32(value: torch.Tensor) -> torch.Tensor:
    """A packed tensor back at training precision (what :func:`_bf16` narrowed; anything else as it is)."""
    return value.float() if value.dtype == torch.bfloat16 else value
