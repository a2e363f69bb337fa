"""Probe: each forecast averaged with the forecast from the context's last N steps, judged as one candidate.

Two readings of one series, its whole context and its recent part, are an average at inference that costs no
training. The sixteenth session measured it (N = 1,024) for the recurrent default of the time on the held-out windows
only (level); this judges it for the shipped Transformer on the benchmark's windows before the test windows. A
candidate folder here is a copy of a checkpoint whose config's ``extra`` says ``"context_pair": N``: wherever the
package asks the network for its quantiles (``Forecaster._network_forecast``: forecasts, and the Seasonal-Naive
blend's backtests), a context longer than N steps is read twice, whole and its last N steps, and the two quantile
sets are averaged (each scaled on what it read). The sign-flip average, the blend, the clamp, the judge and its rule
are the package's and ``scripts/judge_checkpoints.py``'s, run in this process with the patch in place.

    PYTHONPATH=.:scripts .venv/bin/python benchmarks/results/cpu-2026-12-07-session42/context_pair_probe.py \
        runs/pair1024/model --benchmark data/benchmark --real-data data/device/pretrain \
        --out benchmarks/results/cpu-2026-12-07-session42/judge-pair --device cpu --spans-back 2,3,4,5 \
        --watch yosemite_temps/5T/long --watch yosemite_temps/5T/medium
"""

from __future__ import annotations

import sys

import judge_checkpoints  # scripts/

from tsfm.model import Forecaster

_network_forecast = Forecaster._network_forecast


def _paired_network_forecast(self: Forecaster, context, prediction_length, decoding, scale, flip):
    recent = self.config.extra.get("context_pair")
    if flip or scale is not None or recent is None or context.shape[-1] <= recent:
        return _network_forecast(self, context, prediction_length, decoding, scale, flip)  # flip: back here, unflipped
    whole = _network_forecast(self, context, prediction_length, decoding, None, False)
    return 0.5 * (whole + _network_forecast(self, context[..., -recent:], prediction_length, decoding, None, False))


Forecaster._network_forecast = _paired_network_forecast

if __name__ == "__main__":
    sys.exit(judge_checkpoints.main(sys.argv[1:]))
