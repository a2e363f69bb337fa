"""tsfm: zero-shot probabilistic forecasting with a fixed patch pipeline and pluggable sequence backbones.

Users reach it through ``tsfm.predict`` / ``tsfm.predict_df`` (arrays and DataFrames), ``tsfm.load_model``
(checkpoints and the shipped default), ``tsfm.open_stream`` (streaming forecasts), the ``tsfm`` command
line and the REST service in ``serving``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Forecaster", "ModelConfig", "Stream", "__version__", "load_model", "open_stream", "predict", "predict_df",
           "save_model"]

if TYPE_CHECKING:
    from tsfm.checkpoint import load_model, save_model
    from tsfm.config import ModelConfig
    from tsfm.forecast import predict, predict_df
    from tsfm.model import Forecaster
    from tsfm.stream import Stream, open_stream

_LAZY = {
    "load_model": "tsfm.checkpoint",
    "save_model": "tsfm.checkpoint",
    "ModelConfig": "tsfm.config",
    "predict": "tsfm.forecast",
    "predict_df": "tsfm.forecast",
    "Forecaster": "tsfm.model",
    "Stream": "tsfm.stream",
    "open_stream": "tsfm.stream",
}


def __getattr__(name: str) -> Any:
    """Import on first use, so ``import tsfm`` (and ``tsfm --help``) stays fast."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tsfm' has no attribute {name!r}")
