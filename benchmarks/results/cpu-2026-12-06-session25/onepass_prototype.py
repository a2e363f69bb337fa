"""Prototype (not in the package): the Seasonal-Naive blend's backtest read in the same pass as the forecast.

``Forecaster.forecast`` is replaced, in this process only, by a version that reads the context once, in two parts:
the tokens before the backtest's origin (the backtest's horizon rounded up to whole patches), whose end state gives
the backtest's masked forecast, then the last tokens, whose end state gives the real forecast. The backtest uses the
whole context's scale. Masked decoding and recurrent backbones only. Then it runs ``scripts/eval_checkpoints.py``
with the given arguments:

    PYTHONPATH=. python benchmarks/results/cpu-2026-12-06-session25/onepass_prototype.py tsfm/models/default \\
        --names bt-onepass --naive-blend inverse_mse --infer-nonnegative on --before-test \\
        --normaliser S24/before_test_windows/seasonal_naive/all_results.csv --benchmark data/benchmark --out OUT \\
        --device cpu
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import torch

from tsfm import naive_blend as nb
from tsfm.model import Forecaster, clamp_if_nonnegative, has_no_negative_value
from tsfm.seasonality import detect_period, seasonal_naive_hint


def forecast(self: Forecaster, context: torch.Tensor, prediction_length: int, decoding: str | None = None,
             scale: Any = None, infer_nonnegative: bool | None = None, naive_blend: str | None = None) -> torch.Tensor:
    decoding = self.config.decoding if decoding is None else decoding
    blend = self.config.naive_blend if naive_blend is None else naive_blend
    nonnegative = self.config.infer_nonnegative if infer_nonnegative is None else infer_nonnegative
    if decoding != "masked" or scale is not None:
        raise NotImplementedError("the prototype covers masked decoding with a fitted scale")
    context = context.to(self.device, torch.float32)
    scale = self.fit_scale(context)
    patch = self.config.patch_size
    tokens = self._context_tokens(context, scale)
    count = tokens.shape[1]
    horizon = nb.backtest_horizon(context.shape[1], prediction_length)
    held_out = math.ceil(horizon / patch) if horizon >= 1 else 0
    missing = max(self.config.context_length // patch - count, 0)
    prefix = self._state_after_missing_tokens(missing, tokens) if missing > 0 else None
    if blend == "off" or held_out < 1 or count - held_out < 1:
        hidden, state = self.backbone(tokens, state=prefix, return_state=True)
        out = self.decode_from_state(hidden[:, -1], state, scale, prediction_length, decoding)
    else:
        before, state_before = self.backbone(tokens[:, : count - held_out], state=prefix, return_state=True)
        hidden, state = self.backbone(tokens[:, count - held_out :], state=state_before, return_state=True)
        out = self.decode_from_state(hidden[:, -1], state, scale, prediction_length, decoding)
        steps = held_out * patch
        period = detect_period(context)
        if steps < context.shape[1]:
            usable = nb.backtestable(context[:, :-steps], period)
            if usable.any():
                backtest = self.decode_from_state(before[:, -1], state_before, scale, steps, decoding)
                weight = nb.naive_weight(context, period, backtest[:, self._median_index], blend)
                weight = torch.where(usable, weight, 0.0)
                naive = seasonal_naive_hint(context, period, out.shape[2])
                shift = torch.nan_to_num(naive - out[:, self._median_index], nan=0.0) * weight[:, None]
                out = out + shift[:, None, :]
    return clamp_if_nonnegative(out, has_no_negative_value(context)) if nonnegative else out


if __name__ == "__main__":
    Forecaster.forecast = forecast  # type: ignore[method-assign]
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
    import eval_checkpoints

    sys.exit(eval_checkpoints.main(sys.argv[1:]))
