"""Probe: two networks from different initialisations averaged level by level, judged as one candidate.

The fresh run of this session (``tf10-fresh``) shares no initialisation with the shipped default, so it cannot be
averaged with it in weight space; its forecasts can be. A candidate folder here is a copy of a checkpoint whose
config's ``extra`` names a partner checkpoint (``"ensemble_with": PATH``): wherever the package asks the network for
its quantiles (``Forecaster._network_forecast``: forecasts, and the Seasonal-Naive blend's backtests), this script
returns the mean of both networks' quantiles (sorted stays sorted: a mean of two sorted vectors). Everything else,
the blend, the clamp, the judge and its rule, is the package's and ``scripts/judge_checkpoints.py``'s, run in this
process with the patch in place.

    PYTHONPATH=.:scripts .venv/bin/python benchmarks/results/cpu-2026-12-07-session41/ensemble_probe.py \
        runs/ens-fresh/model --benchmark data/benchmark --real-data data/device/pretrain \
        --out benchmarks/results/cpu-2026-12-07-session41/judge-ensemble --device cpu --spans-back 2,3,4,5 \
        --watch yosemite_temps/5T/long --watch yosemite_temps/5T/medium
"""

from __future__ import annotations

import sys

import judge_checkpoints  # scripts/
import torch

from tsfm.checkpoint import load_model
from tsfm.model import Forecaster

_network_forecast = Forecaster._network_forecast
_partners: dict[tuple[str, str], Forecaster] = {}


def _averaged_network_forecast(self: Forecaster, context, prediction_length, decoding, scale, flip):
    out = _network_forecast(self, context, prediction_length, decoding, scale, flip)
    partner_path = self.config.extra.get("ensemble_with")
    if partner_path is None:
        return out
    key = (partner_path, str(self.device))
    if key not in _partners:  # first met inside the predictor's inference mode: load as ordinary tensors
        with torch.inference_mode(False):
            _partners[key] = load_model(partner_path, device=self.device)
    partner = _partners[key]
    return 0.5 * (out + _network_forecast(partner, context, prediction_length, decoding, scale, flip))


Forecaster._network_forecast = _averaged_network_forecast

if __name__ == "__main__":
    sys.exit(judge_checkpoints.main(sys.argv[1:]))
