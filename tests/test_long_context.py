"""Contexts past the trained length: recurrent backbones read them, the Transformer refuses them clearly."""

import numpy as np
import pytest
import torch

from tsfm.config import ModelConfig
from tsfm.forecast import predict
from tsfm.model import Forecaster
from tsfm.stream import open_stream


def tiny(backbone: str, decoding: str = "masked") -> Forecaster:
    torch.manual_seed(0)
    config = ModelConfig(backbone=backbone, d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         context_length=64, train_horizon_patches=2, decoding=decoding)
    return Forecaster(config).eval()


@pytest.mark.parametrize("decoding", ["masked", "autoregressive"])
@pytest.mark.parametrize("spec", ["xlstm[3:1]", "xlstm[1:1]", "mamba2", "gdn", "gdn[neg_eigval]"])
def test_recurrent_backbones_read_past_the_trained_length(spec, decoding):
    model = tiny(spec, decoding)
    values = np.random.default_rng(0).normal(size=300).cumsum()
    long, _ = predict(values, 16, model=model, context_length=256)
    short, _ = predict(values, 16, model=model)
    assert np.isfinite(long).all()
    assert not np.allclose(long, short)  # the extra history is read
    # the long window is exactly the forecaster over the last 256 steps
    direct = model.forecast(torch.as_tensor(values[-256:], dtype=torch.float32)[None], 16)
    np.testing.assert_allclose(np.moveaxis(long, 2, 1)[0, [0, 4, 8]], direct[0, [0, 4, 8]].numpy(), atol=1e-5)


def test_transformer_refuses_past_its_trained_length():
    model = tiny("transformer")
    values = np.random.default_rng(0).normal(size=300)
    predict(values, 8, model=model, context_length=64)
    with pytest.raises(ValueError, match=r"context_length: backbone 'transformer' was trained on .* at most 64"):
        predict(values, 8, model=model, context_length=256)
    with pytest.raises(ValueError, match="at most 64"):
        open_stream(model, values, context_length=128)


def test_shipped_recurrent_model_reads_8192_steps_and_the_default_refuses_them():
    t = np.arange(9000, dtype=np.float64)
    values = np.sin(2 * np.pi * t / 24) + 0.001 * t
    long, median = predict(values, 48, model="recurrent", context_length=8192)
    assert long.shape == (1, 48, 9) and np.isfinite(long).all() and np.isfinite(median).all()
    with pytest.raises(ValueError, match="context_length: backbone 'transformer'"):
        predict(values, 48, context_length=8192)
