"""Where do the `weather`-trained models lose `yosemite_temps/5T/medium`? Per window before the test windows (spans
back 2 and 3; the test windows are not read): the median's MAE with the shipped inference for each model, and
Seasonal Naive's (the benchmark's season length), plus the mean level change from the context's last day to the
window's days:

    cd /work/main && PYTHONPATH=.:benchmarks/results/cpu-2026-12-06-session34 .venv/bin/python \
        benchmarks/results/cpu-2026-12-07-session36/yosemite_per_window.py --benchmark data/benchmark \
        --models default runs/soup36-all8/model
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from yosemite_period import yosemite_windows

from tsfm.checkpoint import load_model
from tsfm.seasonality import seasonal_naive_hint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--models", nargs="+", required=True)
    args = parser.parse_args()
    models = [load_model(name, device="cpu") for name in args.models]
    length = models[0].config.context_length
    print("term spans window | " + " | ".join(args.models) + " | seasonal naive | level change (last day -> future)")
    for term, spans, window, context, truth, season in yosemite_windows(args.benchmark, length):
        horizon = truth.shape[0]
        maes = []
        for model in models:
            with torch.no_grad():
                median = model.forecast(context, horizon)[0, model.quantile_levels.index(0.5)]
            maes.append(float((median - truth).abs().nanmean()))
        naive = seasonal_naive_hint(context, torch.tensor([season]), horizon)[0]
        shift = float(truth.nanmean() - context[0, -season:].nanmean())
        print(f"{term} {spans} {window} | " + " | ".join(f"{m:.2f}" for m in maes)
              + f" | {float((naive - truth).abs().nanmean()):.2f} | {shift:+.2f}", flush=True)


if __name__ == "__main__":
    main()
