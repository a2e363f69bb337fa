import json
import subprocess
import sys

import pytest
import torch

pytest.importorskip("lightning")

from tsfm.checkpoint import load_model
from tsfm.cli import main
from tsfm.config import ModelConfig
from tsfm.pipelines.train import TrainConfig, train


def tiny_config() -> ModelConfig:
    return ModelConfig(backbone="xlstm[1:1]", d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                       context_length=64, train_horizon_patches=2)


def test_train_writes_a_loadable_checkpoint_with_provenance(tmp_path):
    config = TrainConfig(steps=4, batch_size=8, warmup_steps=2, context_length=64, synthetic_pool=16)
    path = train(tiny_config(), config, tmp_path / "model", progress=False)
    model = load_model(path)
    assert torch.isfinite(model.forecast(torch.randn(2, 64), 16)).all()
    training = json.loads((path / "config.json").read_text())["training"]
    assert training["train_config"]["steps"] == 4
    assert training["final_train_loss"] is not None and training["final_train_loss"] > 0


def test_train_with_real_series_only(tmp_path):
    real = [torch.sin(torch.arange(300.0) / 5).numpy() for _ in range(3)]
    config = TrainConfig(steps=3, batch_size=4, warmup_steps=1, context_length=64, synthetic_fraction=0.0)
    path = train(tiny_config(), config, tmp_path / "model", real_series=real, progress=False)
    assert (path / "model.safetensors").is_file()


def test_train_config_rejects_bad_values():
    with pytest.raises(ValueError, match="synthetic_fraction"):
        TrainConfig(synthetic_fraction=2.0)
    with pytest.raises(ValueError, match="positive"):
        TrainConfig(steps=0)


def test_cli_train_rejects_unknown_backbone(tmp_path, capsys):
    assert main(["train", "--backbone", "nope", "--out", str(tmp_path / "m")]) == 2
    assert "nope" in capsys.readouterr().err


def test_tsfm_import_stays_light():
    """tsfm must not import pipelines or serving (imports point one way), nor heavy optional libraries."""
    code = ("import sys, tsfm, tsfm.forecast, tsfm.checkpoint; "
            "bad = [m for m in ('pipelines', 'serving', 'lightning', 'gluonts', 'fastapi') if m in sys.modules]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
