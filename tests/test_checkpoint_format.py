"""The on-disk format, guarded by a frozen checkpoint (tests/fixtures/checkpoints, as chronos does)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

import tsfm
from tsfm.checkpoint import FORMAT_VERSION
from tsfm.scaling import invert_scale

FROZEN = Path(__file__).parent / "fixtures" / "checkpoints" / "tiny-xlstm"
# the median forecast the frozen weights gave when they were written (tsfm 0.1.0, format_version 1), from the
# 64-step context read alone: what the model's forward still computes at its last token
EXPECTED_MEDIAN = [10.231824, 9.904555, 10.026143, 10.020456, 9.711344, 9.882875, 10.164505, 9.867584]
# what `predict` gives since the fourteenth session, which reads a short context after the missing patches that
# fill the trained window (2,048 steps), as training did (Forecaster.read_context)
EXPECTED_PREDICT_MEDIAN = [10.205065, 9.931334, 9.972023, 10.025669, 9.744167, 9.922162, 10.176486, 9.852706]


def test_the_frozen_checkpoint_has_the_current_format_version() -> None:
    payload = json.loads((FROZEN / "config.json").read_text())
    assert payload["format"] == "tsfm"
    assert payload["format_version"] == FORMAT_VERSION == 1


def test_the_frozen_checkpoint_loads_and_forecasts_as_when_it_was_written() -> None:
    model = tsfm.load_model(FROZEN)
    assert model.config.backbone == "xlstm[1:1]" and model.config.patch_size == 8
    series = 10 + np.sin(np.arange(64) * 2 * np.pi / 16)
    with torch.no_grad():
        out = model(torch.tensor(series, dtype=torch.float32)[None])
    quantiles = out.quantiles[:, -1].sort(dim=1).values  # the last token's forecast of the next patch
    median = invert_scale(quantiles[:, model.quantile_levels.index(0.5)], out.scale)
    np.testing.assert_allclose(median[0].numpy(), EXPECTED_MEDIAN, rtol=1e-4)
    _, median = tsfm.predict([series], prediction_length=8, model=model)
    np.testing.assert_allclose(median[0], EXPECTED_PREDICT_MEDIAN, rtol=1e-4)
