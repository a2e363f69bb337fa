import json

import pytest
import torch

from tsfm.checkpoint import BUILTIN_MODELS, CheckpointError, load_model, save_model
from tsfm.config import ModelConfig
from tsfm.model import Forecaster


@pytest.fixture
def model():
    torch.manual_seed(0)
    config = ModelConfig(backbone="xlstm[1:1]", d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4)
    return Forecaster(config).eval()


def test_round_trip_gives_identical_forecasts(model, tmp_path):
    path = save_model(model, tmp_path / "ckpt", training={"note": "test"})
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors"]
    loaded = load_model(path)
    context = torch.randn(4, 70)
    assert torch.equal(model.forecast(context, 20), loaded.forecast(context, 20))
    assert json.loads((path / "config.json").read_text())["training"] == {"note": "test"}


def test_overwrite_replaces_atomically(model, tmp_path):
    save_model(model, tmp_path / "ckpt")
    save_model(model, tmp_path / "ckpt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_default_model_loads_and_forecasts():
    model = load_model("default")
    out = model.forecast(torch.randn(2, 300), 48)
    assert out.shape == (2, len(model.quantile_levels), 48) and torch.isfinite(out).all()


def test_missing_path(tmp_path):
    with pytest.raises(CheckpointError, match="neither a built-in model"):
        load_model(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"config\.json not found"):
        load_model(tmp_path / "empty")


def test_corrupt_weights(model, tmp_path):
    path = save_model(model, tmp_path / "ckpt")
    (path / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(CheckpointError, match="corrupt"):
        load_model(path)


def test_truncated_weights(model, tmp_path):
    path = save_model(model, tmp_path / "ckpt")
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError):
        load_model(path)


def test_corrupt_config(model, tmp_path):
    path = save_model(model, tmp_path / "ckpt")
    (path / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_model(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"d_model": 64}, "shape mismatch"),
        ({"n_layers": 3}, "missing"),
        ({"backbone": "nope"}, "cannot build"),
        ({"d_model": -1}, "invalid model config"),
    ],
)
def test_mismatched_config(model, tmp_path, change, message):
    path = save_model(model, tmp_path / "ckpt")
    payload = json.loads((path / "config.json").read_text())
    payload["model"].update(change)
    (path / "config.json").write_text(json.dumps(payload))
    with pytest.raises(CheckpointError, match=message):
        load_model(path)


def test_wrong_format_version(model, tmp_path):
    path = save_model(model, tmp_path / "ckpt")
    payload = json.loads((path / "config.json").read_text())
    payload["format_version"] = 99
    (path / "config.json").write_text(json.dumps(payload))
    with pytest.raises(CheckpointError, match="format_version"):
        load_model(path)


def test_builtin_models_load_and_forecast():
    """Every shipped model loads by name, with the decoding their cards name, and gives finite, sorted quantiles of
    the right shape."""
    decodings = {"default": "masked", "recurrent": "masked"}
    assert set(BUILTIN_MODELS) == set(decodings)
    for name in BUILTIN_MODELS:
        model = load_model(name)
        assert model.config.decoding == decodings[name]
        context = torch.sin(torch.arange(600.0) / 5)[None]
        forecast = model.forecast(context, 40)
        assert forecast.shape == (1, len(model.quantile_levels), 40) and torch.isfinite(forecast).all()
        assert (forecast.diff(dim=1) >= 0).all()


def test_a_retired_builtin_name_says_where_the_model_went(tmp_path, monkeypatch):
    """A name that once loaded a built-in (``small``) says what to do instead (its folder from git history), and a
    folder of that name in the working directory still loads."""
    with pytest.raises(CheckpointError, match=r"'small' .*no longer ships.*make restore-retired.*runs/retired/small"):
        load_model("small")
    torch.manual_seed(0)
    save_model(Forecaster(ModelConfig(backbone="xlstm[0:1]", d_model=16, n_layers=1, n_heads=2, patch_size=8,
                                      context_length=64)), tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    assert load_model("small").config.backbone == "xlstm[0:1]"


@pytest.mark.parametrize("decoding", ["masked", "autoregressive"])
def test_xlstm_conv_round_trip_keeps_the_spec_and_the_forecasts(tmp_path, decoding):
    """The spec with its option is what config.json stores, and it rebuilds the conv; autoregressive decoding
    carries the conv state from the prefill through every step."""
    torch.manual_seed(0)
    config = ModelConfig(backbone="xlstm[1:1,conv]", d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         decoding=decoding)
    model = Forecaster(config).eval()
    path = save_model(model, tmp_path / "ckpt")
    assert json.loads((path / "config.json").read_text())["model"]["backbone"] == "xlstm[1:1,conv]"
    loaded = load_model(path)
    assert loaded.config == model.config
    assert loaded.backbone.mlstm_conv and "backbone.blocks.0.mixer.conv.weight" in loaded.state_dict()
    context = torch.randn(4, 70)
    assert torch.equal(model.forecast(context, 20), loaded.forecast(context, 20))

    payload = json.loads((path / "config.json").read_text())
    payload["model"]["backbone"] = "xlstm[1:1]"  # the same weights cannot load as the model without the conv
    (path / "config.json").write_text(json.dumps(payload))
    with pytest.raises(CheckpointError):
        load_model(path)


def test_load_model_replaces_the_inference_settings_only(model, tmp_path):
    path = save_model(Forecaster(model.config.replace(infer_nonnegative=True)).eval(), tmp_path / "ckpt")
    stored = load_model(path)
    assert stored.config.infer_nonnegative and stored.config.decoding == "masked"
    changed = load_model(path, infer_nonnegative=False, decoding="autoregressive")
    assert changed.config == stored.config.replace(infer_nonnegative=False, decoding="autoregressive")
    context = torch.rand(2, 70) + 0.1  # never negative: the stored setting clamps, the replaced one does not
    assert torch.equal(changed.forecast(context, 20), stored.forecast(context, 20, "autoregressive",
                                                                      infer_nonnegative=False))
    with pytest.raises(ValueError, match="load_model: invalid ModelConfig: decoding must be one of"):
        load_model(path, decoding="beam")
    with pytest.raises(ValueError, match="infer_nonnegative must be true or false"):
        load_model(path, infer_nonnegative="no")
