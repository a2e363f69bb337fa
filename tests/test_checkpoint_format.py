"""The on-disk format, guarded by a frozen checkpoint (tests/fixtures/checkpoints, as chronos does)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import tsfm
from tsfm.checkpoint import FORMAT_VERSION

FROZEN = Path(__file__).parent / "fixtures" / "checkpoints" / "tiny-xlstm"
# the median forecast the frozen weights gave when they were written (tsfm 0.1.0, format_version 1)
EXPECTED_MEDIAN = [10.231824, 9.904555, 10.026143, 10.020456, 9.711344, 9.882875, 10.164505, 9.867584]


def test_the_frozen_checkpoint_has_the_current_format_version() -> None:
    payload = json.loads((FROZEN / "config.json").read_text())
    assert payload["format"] == "tsfm"
    assert payload["format_version"] == FORMAT_VERSION == 1


def test_the_frozen_checkpoint_loads_and_forecasts_as_when_it_was_written() -> None:
    model = tsfm.load_model(FROZEN)
    assert model.config.backbone == "xlstm[1:1]" and model.config.patch_size == 8
    series = 10 + np.sin(np.arange(64) * 2 * np.pi / 16)
    _, median = tsfm.predict([series], prediction_length=8, model=model)
    np.testing.assert_allclose(median[0], EXPECTED_MEDIAN, rtol=1e-4)
