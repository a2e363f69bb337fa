"""Checkpoints: ``config.json`` + ``model.safetensors`` in one folder (no pickle), and the shipped default model.

Large weights may be split into shards ``model-00001-of-0000N.safetensors`` (each under a size limit, so they fit
where single files are capped, e.g. 16 MiB in this repository) and stored in bfloat16 to halve the size; loading
reads every shard and casts to the model's float32 parameters.

``config.json`` holds ``{"format": "tsfm", "format_version": 1, "model": <ModelConfig>, "training": {...}}``;
``training`` is free-form provenance (command, data, steps) and never affects loading. Loading checks that the
weights match the config exactly, so a mismatched or truncated file fails loudly instead of forecasting garbage.
"""

from __future__ import annotations

import json
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from tsfm.config import ModelConfig
from tsfm.model import Forecaster

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
SHARD_PATTERN = "model-{index:05d}-of-{count:05d}.safetensors"
FORMAT_NAME = "tsfm"
#: Largest shard of a file written for moving (an exported model, a packed run): every file fits where single files
#: are capped (16 MiB in this repository and for device transfers).
MAX_SHARD_BYTES = 15 * 2**20
FORMAT_VERSION = 1
BUILTIN_MODELS = ("default", "recurrent")
"""Models shipped in the package: ``default`` (the most accurate; a Transformer) and ``recurrent`` (the default before
it, sLSTM blocks: a stream carries its state, so an update and a forecast cost O(new patches), where a stream of the
Transformer re-reads each tail; and it reads contexts past 2,048 steps); scores in tsfm/models/default/README.md."""

RETIRED_MODELS = {
    "small": "the built-in 'small' model (1M parameters, context 512, behind Seasonal Naive on the benchmark) no "
             "longer ships with the package (forty-sixth session); in a checkout of the repository `make "
             "restore-retired` writes it from git history to runs/retired/small (load that folder)",
}
"""Names of models that once shipped, each with what to do instead: a clear error rather than 'no such folder'."""


class CheckpointError(ValueError):
    """A checkpoint folder is missing, corrupt, or does not match its config."""


def builtin_model_path(name: str) -> Path:
    """Folder of a model shipped inside the package (``tsfm/models/<name>``)."""
    return Path(str(resources.files("tsfm") / "models" / name))


def resolve_model_path(name_or_path: str | os.PathLike[str]) -> Path:
    """A built-in name (``"default"``) or a folder path -> the checkpoint folder."""
    if isinstance(name_or_path, str) and name_or_path in BUILTIN_MODELS:
        return builtin_model_path(name_or_path)
    path = Path(name_or_path)
    if not path.exists() and isinstance(name_or_path, str) and name_or_path in RETIRED_MODELS:
        raise CheckpointError(RETIRED_MODELS[name_or_path])
    if not path.exists():
        raise CheckpointError(
            f"model {str(name_or_path)!r} is neither a built-in model ({', '.join(BUILTIN_MODELS)}) "
            "nor an existing checkpoint folder"
        )
    return path


def save_model(
    model: Forecaster,
    path: str | os.PathLike[str],
    *,
    training: dict[str, Any] | None = None,
    dtype: torch.dtype | None = None,
    max_shard_bytes: int | None = None,
) -> Path:
    """Write ``model`` to folder ``path`` atomically (a temporary folder renamed into place).

    Args:
        training: free-form provenance stored in ``config.json``.
        dtype: store floating-point tensors in this dtype (e.g. ``torch.bfloat16``); ``None`` keeps theirs.
        max_shard_bytes: split the weights into shards of at most this many tensor bytes (``None``: one file).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "model": model.config.to_dict(),
        "training": training or {},
    }
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    (staging / CONFIG_FILE).write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    state = {}
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().to("cpu")
        if dtype is not None and tensor.is_floating_point():
            tensor = tensor.to(dtype)
        state[name] = tensor.contiguous()
    shards = split_into_shards(state, max_shard_bytes)
    for index, shard in enumerate(shards, start=1):
        name = WEIGHTS_FILE if len(shards) == 1 else SHARD_PATTERN.format(index=index, count=len(shards))
        save_file(shard, str(staging / name), metadata={"format": FORMAT_NAME})
    if target.exists():
        backup = target.with_name(f".{target.name}.old")
        target.rename(backup)
        staging.rename(target)
        for child in backup.iterdir():
            child.unlink()
        backup.rmdir()
    else:
        staging.rename(target)
    return target


def split_into_shards(state: dict[str, torch.Tensor], max_bytes: int | None) -> list[dict[str, torch.Tensor]]:
    """Split ``state`` in order into groups of at most ``max_bytes`` tensor bytes (a larger tensor alone)."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if max_bytes is not None and shards[-1] and size + nbytes > max_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    return shards


def weight_files(path: str | os.PathLike[str]) -> list[Path]:
    """The weight file(s) of a checkpoint folder: ``model.safetensors`` or its shards, in order."""
    folder = Path(path)
    single = folder / WEIGHTS_FILE
    if single.is_file():
        return [single]
    return sorted(folder.glob("model-*-of-*.safetensors"))


def read_checkpoint_config(path: str | os.PathLike[str]) -> tuple[ModelConfig, dict[str, Any]]:
    """Parse and validate ``config.json`` -> ``(ModelConfig, training provenance)``."""
    config_path = Path(path) / CONFIG_FILE
    if not config_path.is_file():
        raise CheckpointError(
            f"{config_path} not found: a tsfm checkpoint folder holds {CONFIG_FILE} and {WEIGHTS_FILE}"
        )
    try:
        payload = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{config_path} is not valid JSON: {err}") from err
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_NAME:
        raise CheckpointError(f"{config_path} is not a tsfm checkpoint config (missing \"format\": \"{FORMAT_NAME}\")")
    if payload.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{config_path} has format_version {payload.get('format_version')!r}; this tsfm reads {FORMAT_VERSION}"
        )
    try:
        config = ModelConfig.from_dict(payload["model"])
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{config_path}: invalid model config: {err}") from err
    return config, payload.get("training", {})


def load_model(
    name_or_path: str | os.PathLike[str] = "default",
    *,
    device: str | torch.device = "cpu",
    decoding: str | None = None,
    infer_nonnegative: bool | None = None,
    naive_blend: str | None = None,
    flip_equivariant: bool | None = None,
) -> Forecaster:
    """Load a Forecaster from a built-in name (``"default"``) or a checkpoint folder, in eval mode.

    ``decoding``, ``infer_nonnegative``, ``naive_blend`` and ``flip_equivariant`` replace the checkpoint's inference
    settings of the same names (``ModelConfig``; the weights do not depend on them), e.g.
    ``load_model("default", infer_nonnegative=False)`` for series that may turn negative after a non-negative history,
    ``naive_blend="off"`` for the model's own forecasts, or ``flip_equivariant=False`` for half the compute
    (everywhere the model goes: ``predict``, streams, the service).
    """
    path = resolve_model_path(name_or_path)
    config, _ = read_checkpoint_config(path)
    inference = {k: v for k, v in (("decoding", decoding), ("infer_nonnegative", infer_nonnegative),
                                   ("naive_blend", naive_blend), ("flip_equivariant", flip_equivariant))
                 if v is not None}
    if inference:
        try:
            config = config.replace(**inference)
        except ValueError as err:
            raise ValueError(f"load_model: {err}") from None
    files = weight_files(path)
    if not files:
        raise CheckpointError(f"{path / WEIGHTS_FILE} not found (nor shards model-*-of-*.safetensors)")
    if files[0].name != WEIGHTS_FILE:
        count = int(files[0].name.rsplit("-of-", 1)[1].split(".")[0])
        if len(files) != count:
            raise CheckpointError(f"{path}: {len(files)} weight shard(s) found, their names say {count}")
    state: dict[str, torch.Tensor] = {}
    for weights_path in files:
        try:
            state.update(load_file(str(weights_path)))
        except (SafetensorError, OSError, ValueError) as err:
            raise CheckpointError(f"{weights_path} is corrupt or not a safetensors file: {err}") from err
    try:
        model = Forecaster(config)
    except ValueError as err:
        raise CheckpointError(f"{path}: cannot build the model its config describes: {err}") from err
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong_shape = sorted(k for k in set(expected) & set(state) if expected[k].shape != state[k].shape)
    if missing or unexpected or wrong_shape:
        details = []
        if missing:
            details.append(f"missing {len(missing)} tensor(s), e.g. {missing[:3]}")
        if unexpected:
            details.append(f"unexpected {len(unexpected)} tensor(s), e.g. {unexpected[:3]}")
        if wrong_shape:
            k = wrong_shape[0]
            details.append(f"shape mismatch for {k}: file {tuple(state[k].shape)} vs config {tuple(expected[k].shape)}")
        raise CheckpointError(f"{path}: weights do not match config.json ({'; '.join(details)})")
    model.load_state_dict({k: v.to(expected[k].dtype) for k, v in state.items()})
    return model.to(device).eval()
