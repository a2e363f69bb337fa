"""``scripts/average_checkpoints.py``: the weighted mean of one architecture's weights, and clear refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tsfm.checkpoint import load_model, save_model
from tsfm.config import ModelConfig
from tsfm.model import Forecaster

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
try:
    import average_checkpoints
    from average_checkpoints import average_models
finally:
    sys.path.remove(str(ROOT / "scripts"))


def tiny(seed: int, **overrides) -> Forecaster:
    torch.manual_seed(seed)
    settings = {"backbone": "transformer", "d_model": 32, "n_layers": 1, "n_heads": 2, "patch_size": 8,
                "context_length": 64}
    config = ModelConfig(**{**settings, **overrides})
    return Forecaster(config).eval()


def test_average_is_the_weighted_mean_of_every_tensor():
    a, b = tiny(0), tiny(1)
    soup = average_models([a, b], [3.0, 1.0]).state_dict()
    for name, tensor in a.state_dict().items():
        assert torch.allclose(soup[name], 0.75 * tensor + 0.25 * b.state_dict()[name], atol=1e-7), name
    same = average_models([a, a], [1.0, 1.0]).state_dict()
    assert all(torch.equal(same[name], tensor) for name, tensor in a.state_dict().items())


def test_average_refuses_what_cannot_be_averaged():
    a = tiny(0)
    with pytest.raises(ValueError, match="at least two"):
        average_models([a], [1.0])
    with pytest.raises(ValueError, match="1 weight"):
        average_models([a, tiny(1)], [1.0])
    with pytest.raises(ValueError, match="non-negative"):
        average_models([a, tiny(1)], [1.0, -0.5])
    with pytest.raises(ValueError, match="checkpoint 2 has another architecture than the first \\(d_model\\)"):
        average_models([a, tiny(1, d_model=64)], [1.0, 1.0])
    # inference settings steer forecasts, not weights: members may differ in them
    average_models([a, tiny(1, naive_blend="inverse_mse")], [1.0, 1.0])


def test_script_writes_a_checkpoint_with_its_members_named(tmp_path):
    for seed in (0, 1):
        save_model(tiny(seed), tmp_path / f"m{seed}", training={"steps": seed})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(ROOT / "scripts" / "average_checkpoints.py"), str(tmp_path / "m0"),
               str(tmp_path / "m1"), "--out", str(tmp_path / "soup"), "--dtype", "bfloat16"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    soup = load_model(tmp_path / "soup")
    expected = average_models([load_model(tmp_path / "m0"), load_model(tmp_path / "m1")], [1.0, 1.0])
    assert all(torch.equal(soup.state_dict()[k], v.to(torch.bfloat16).float())
               for k, v in expected.state_dict().items())
    training = json.loads((tmp_path / "soup" / "config.json").read_text())["training"]
    members = training["averaged_from"]
    assert [m["training"]["steps"] for m in members] == [0, 1] and [m["weight"] for m in members] == [1.0, 1.0]
    assert training["command"] == ("python scripts/average_checkpoints.py " + " ".join(command[2:]))  # how to redo it
    refused = subprocess.run([*command[:2], str(tmp_path / "m0"), "--out", str(tmp_path / "x")], env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "at least two checkpoints" in refused.stderr


def test_script_shards_a_large_average_as_an_exported_run_is(tmp_path, monkeypatch):
    """A 20M average in one 38.5 MiB file could not come back from a device call (files of at most 16 MiB): the
    script writes shards of at most ``MAX_SHARD_BYTES`` (shrunk here so a tiny model needs several), and the shards
    load as the one model."""
    for seed in (0, 1):
        save_model(tiny(seed), tmp_path / f"m{seed}")
    monkeypatch.setattr(average_checkpoints, "MAX_SHARD_BYTES", 20_000)
    assert average_checkpoints.main([str(tmp_path / "m0"), str(tmp_path / "m1"), "--out", str(tmp_path / "soup")]) == 0
    shards = sorted((tmp_path / "soup").glob("*.safetensors"))
    assert len(shards) > 1 and all(shard.stat().st_size < 20_000 + 4_096 for shard in shards)
    expected = average_models([load_model(tmp_path / "m0"), load_model(tmp_path / "m1")], [1.0, 1.0]).state_dict()
    soup = load_model(tmp_path / "soup").state_dict()
    assert all(torch.equal(soup[k], v) for k, v in expected.items())
