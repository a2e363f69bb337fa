"""Prototype (not in the package): the two shipped 10M models as one forecaster, their quantiles averaged level by
level (each model's own forecast, with its own Seasonal-Naive blend and clamp, then the mean of the two).

``Forecaster.forecast`` is replaced, in this process only, by a version that also runs the partner model named by
``--partner`` and averages; then ``scripts/eval_checkpoints.py`` runs with the other arguments:

    PYTHONPATH=. python benchmarks/results/cpu-2026-12-06-session26/ensemble_prototype.py --partner recurrent default \\
        --names bt-ensemble --before-test --normaliser S24/before_test_windows/seasonal_naive/all_results.csv \\
        --benchmark data/benchmark --out OUT --device cpu
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from tsfm.checkpoint import load_model
from tsfm.model import Forecaster

_own_forecast = Forecaster.forecast
_partner: Forecaster | None = None


def forecast(self: Forecaster, context: torch.Tensor, prediction_length: int, *args: Any, **kwargs: Any
             ) -> torch.Tensor:
    """The mean of this model's and the partner's quantiles ``[B, Q, H]`` (sorted levels stay sorted)."""
    own = _own_forecast(self, context, prediction_length, *args, **kwargs)
    if _partner is None or self is _partner:
        return own
    other = _own_forecast(_partner, context.to(_partner.device), prediction_length, *args, **kwargs)
    return (own + other.to(own.device)) / 2


if __name__ == "__main__":
    argv = sys.argv[1:]
    at = argv.index("--partner")
    _partner = load_model(argv[at + 1]).eval()
    del argv[at : at + 2]
    Forecaster.forecast = forecast  # type: ignore[method-assign]
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
    import eval_checkpoints

    sys.exit(eval_checkpoints.main(argv))
