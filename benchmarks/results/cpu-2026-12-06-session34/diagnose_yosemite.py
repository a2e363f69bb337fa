"""Does the backtest's weight per lead band foretell the weight the real future rewards? ``yosemite_temps/5T``
medium/long on the windows before the test windows (spans back 2 and 3; the test windows are not read): per window
and per band of one detected period, the ``inverse_mse`` weight the backtest (context's last ``h`` steps) gives, and
the one the real future's errors would give, ``mse_model / (mse_model + mse_naive)`` on that band of the future:

    cd /work/main && PYTHONPATH=.:benchmarks/results/cpu-2026-12-06-session34 .venv/bin/python \
        benchmarks/results/cpu-2026-12-06-session34/diagnose_yosemite.py --benchmark data/benchmark \
        --out benchmarks/results/cpu-2026-12-06-session34/yosemite_bands.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import torch
from lead_band_prototype import band_weights
from yosemite_period import yosemite_windows

from tsfm.checkpoint import load_model
from tsfm.naive_blend import backtest_horizon, backtestable
from tsfm.seasonality import detect_period, seasonal_naive_hint


def future_weights(truth: torch.Tensor, median: torch.Tensor, naive: torch.Tensor, length: int) -> list[float]:
    """``inverse_mse`` weight per band of ``length`` steps (the last band takes the rest) of one forecast."""
    out = []
    steps = truth.shape[0]
    for start in range(0, steps, length):
        end = min(start + length, steps)
        seen = ~torch.isnan(truth[start:end])
        model = float(((median[start:end] - truth[start:end])[seen] ** 2).mean())
        simple = float(((naive[start:end] - truth[start:end])[seen] ** 2).mean())
        out.append(model / (model + simple) if model + simple > 0 else 0.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    model = load_model("default", device="cpu")
    length = model.config.context_length
    median = model.quantile_levels.index(0.5)
    rows = []
    for term, spans, window, context, truth, _ in yosemite_windows(args.benchmark, length):
        horizon = truth.shape[0]
        period = detect_period(context)
        h = backtest_horizon(context.shape[1], horizon)
        history = context[:, :-h]
        assert bool(backtestable(history, period).all())
        with torch.no_grad():
            backtest = model.forecast(history, h, infer_nonnegative=False, naive_blend="off")[:, median]
            future = model.forecast(context, horizon, infer_nonnegative=False, naive_blend="off")[0, median]
        backtest_band, band = band_weights(context, period, backtest, "period")
        whole, _ = band_weights(context, period, backtest, "one")
        naive = seasonal_naive_hint(context, period, horizon)[0]
        realised = future_weights(truth, future, naive, int(band[0]))
        realised_whole = future_weights(truth, future, naive, horizon)[0]
        model_mse = float(((future - truth) ** 2).nanmean())
        naive_mse = float(((naive - truth) ** 2).nanmean())
        rows.append({"term": term, "spans_back": spans, "window": window, "period": int(period[0]),
                     "h": h, "backtest_weight_one": round(float(whole[0, 0]), 3),
                     "backtest_weight_bands": [round(float(w), 3) for w in backtest_band[0]],
                     "future_weight_one": round(realised_whole, 3),
                     "future_weight_bands": [round(w, 3) for w in realised],
                     "future_mse_model_over_naive": round(model_mse / naive_mse, 3)})
        print(rows[-1], flush=True)
    pd.DataFrame(rows).to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
