"""The sign-flip average (``ModelConfig.flip_equivariant``): forecasts of ``-x`` are exactly minus those of ``x``,
everywhere a model forecasts (``Forecaster.forecast``, ``predict``, ``load_model``, streams, the CLI), and bad
settings are refused by name."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tsfm.checkpoint import load_model, save_model
from tsfm.config import ModelConfig, levels_are_symmetric
from tsfm.forecast import ForecastInputError, predict
from tsfm.model import Forecaster
from tsfm.scaling import ScaleParams, fit_scale
from tsfm.stream import Stream, StreamError, open_stream


def tiny(backbone: str = "gdn", **kw) -> Forecaster:
    torch.manual_seed(0)
    config = ModelConfig(backbone=backbone, d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         context_length=256, train_horizon_patches=2, **kw)
    return Forecaster(config).eval()


def series(count: int = 3, length: int = 120) -> torch.Tensor:
    """Trending, seasonal, noisy series with a level far from 0 (a network is far from the symmetry there)."""
    t = torch.arange(length, dtype=torch.float32)
    torch.manual_seed(1)
    return torch.stack([5.0 + 0.05 * t * (k + 1) + torch.sin(2 * torch.pi * t / 12) + 0.3 * torch.randn(length)
                        for k in range(count)])


@pytest.mark.parametrize("blend", ["off", "inverse_mse"])
@pytest.mark.parametrize("backbone", ["gdn", "transformer"])
def test_a_flipped_series_is_forecast_as_the_mirror_image(backbone, blend):
    model = tiny(backbone, flip_equivariant=True, naive_blend=blend)
    x = series()
    with torch.no_grad():
        up = model.forecast(x, 24)
        down = model.forecast(-x, 24)
        plain_up = model.forecast(x, 24, flip_equivariant=False)
        plain_down = model.forecast(-x, 24, flip_equivariant=False)
    torch.testing.assert_close(down, -up.flip(1), rtol=1e-5, atol=1e-5)
    assert (up.diff(dim=1) >= 0).all(), "quantiles must stay sorted"
    assert not torch.allclose(plain_down, -plain_up.flip(1), atol=1e-3), "the test needs an asymmetric network"
    if blend == "off":  # the network's two forecasts averaged (the blend then acts on the average, not on each)
        torch.testing.assert_close(up, 0.5 * (plain_up - plain_down.flip(1)), rtol=1e-5, atol=1e-5)


def test_a_fixed_scale_is_mirrored_with_the_series():
    """A stream passes its own scale: the mirror image gets the mirrored centre and the same spread."""
    model = tiny(flip_equivariant=True)
    x = series()
    with torch.no_grad():
        torch.testing.assert_close(model.forecast(x, 16, scale=fit_scale(x)), model.forecast(x, 16),
                                   rtol=1e-5, atol=1e-5)


def test_the_setting_is_checked_where_it_is_given():
    with pytest.raises(ValueError, match="flip_equivariant must be true or false"):
        ModelConfig(flip_equivariant="yes")
    with pytest.raises(ValueError, match=r"flip_equivariant needs quantile_levels symmetric about 0\.5"):
        ModelConfig(flip_equivariant=True, quantile_levels=(0.1, 0.5, 0.8))
    assert levels_are_symmetric((0.1, 0.5, 0.9)) and not levels_are_symmetric((0.2, 0.5, 0.9))
    lopsided = Forecaster(ModelConfig(d_model=32, n_layers=1, n_heads=2, context_length=256,
                                      quantile_levels=(0.2, 0.5, 0.9))).eval()
    with pytest.raises(ValueError, match=r"symmetric about 0\.5"):
        lopsided.forecast(series(), 8, flip_equivariant=True)
    with pytest.raises(ForecastInputError, match="flip_equivariant must be True, False or None"):
        predict(series()[0].numpy(), 8, model=tiny(), flip_equivariant="on")


def test_predict_and_load_model_follow_the_model_unless_told(tmp_path):
    model = tiny(flip_equivariant=True)
    save_model(model, tmp_path / "flip")
    values = series()[0].numpy()
    on, _ = predict(values, 16, model=model)
    off, _ = predict(values, 16, model=model, flip_equivariant=False)
    mirrored, _ = predict(-values, 16, model=model)
    np.testing.assert_allclose(mirrored, -on[..., ::-1], rtol=1e-5, atol=1e-5)
    assert not np.allclose(on, off, atol=1e-3)
    loaded_off = load_model(tmp_path / "flip", flip_equivariant=False)
    assert not loaded_off.config.flip_equivariant and load_model(tmp_path / "flip").config.flip_equivariant
    np.testing.assert_allclose(predict(values, 16, model=loaded_off)[0], off, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backbone", ["gdn", "transformer"])
def test_a_stream_forecasts_as_predict_does(backbone):
    """A stream of a flip-equivariant model re-reads its tail (a carried state holds only one of the two images),
    so after an update it forecasts as ``Forecaster.forecast`` does on the same series at the stream's scale, blend
    and mirror image included, and a mirrored stream forecasts the mirror image."""
    model = tiny(backbone, flip_equivariant=True, naive_blend="inverse_mse")
    assert model.streams_recompute
    full = series(2, 160)
    streams = [open_stream(model, [s[:120].numpy() for s in sign * full], max_drift=None) for sign in (1, -1)]
    for stream, sign in zip(streams, (1, -1), strict=True):
        stream.update([s[120:].numpy() for s in sign * full])
    with torch.no_grad():
        got, mirrored = (stream.forecast_model_quantiles(16) for stream in streams)
        want = model.forecast(full, 16, scale=ScaleParams(streams[0]._loc, streams[0]._scale))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(mirrored, -got.flip(1), rtol=1e-4, atol=1e-4)
    with pytest.raises(StreamError, match="re-reads its tail"):
        open_stream(model, full[0], cuda_graphs=True)


def test_a_snapshot_restores_only_where_its_state_is_there():
    """A recurrent model's snapshot taken without the average carries a state and restores under either setting; one
    taken with it carries none and names the setting when a model without it is asked to restore it."""
    plain = tiny("gdn")
    flipping = Forecaster(plain.config.replace(flip_equivariant=True)).eval()
    flipping.load_state_dict(plain.state_dict())
    values = series(1)[0].numpy()
    Stream.from_state_dict(flipping, open_stream(plain, values).state_dict())
    snapshot = open_stream(flipping, values).state_dict()
    assert "last" not in snapshot
    with pytest.raises(StreamError, match="flip_equivariant"):
        Stream.from_state_dict(plain, snapshot)


def test_the_cli_switch_reaches_the_forecast(tmp_path, capsys):
    from tsfm.cli import main

    model = tiny(flip_equivariant=True)
    save_model(model, tmp_path / "flip")
    frame = "item_id,timestamp,target\n" + "".join(f"a,2024-01-{d + 1:02d},{v}\n"
                                                   for d, v in enumerate(series(1, 30)[0].tolist()))
    (tmp_path / "data.csv").write_text(frame)
    outputs = {}
    for flag in ("--flip-equivariant", "--no-flip-equivariant"):
        out = tmp_path / f"{flag}.csv"
        assert main(["forecast", str(tmp_path / "data.csv"), "-H", "4", "--model", str(tmp_path / "flip"),
                     flag, "-o", str(out)]) == 0
        outputs[flag] = out.read_text()
    capsys.readouterr()
    assert outputs["--flip-equivariant"] != outputs["--no-flip-equivariant"]
    config = json.loads((tmp_path / "flip" / "config.json").read_text())["model"]
    assert config["flip_equivariant"] is True
