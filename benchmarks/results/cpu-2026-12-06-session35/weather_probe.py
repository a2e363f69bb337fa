"""Is the ``weather`` prior (a calendar cycle whose level and amplitude wander per cycle, opt-in and not yet trained
on) a weakness of the shipped default, as ``yosemite_temps/5T/long`` is? Draws series from it per calendar, forecasts
their last ``H`` steps from one context length of the model (the default or ``--model``) before them, the shipped
blend on, then off, and prints the median's MAE over Seasonal Naive's (on the generating period), geometric mean over
series; for contrast the same with the ``seasonal`` prior (a fixed main cycle, a weekly one, trend and white noise):

    cd /work/main && PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2026-12-06-session35/weather_probe.py
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from tsfm.checkpoint import load_model
from tsfm.pipelines.data.priors import PRIORS
from tsfm.pipelines.data.priors.common import CALENDARS
from tsfm.seasonality import seasonal_naive_hint


def ratios(model, series: torch.Tensor, period: int, horizon: int, blend: str) -> np.ndarray:
    """Per series: the median forecast's MAE over Seasonal Naive's on the last ``horizon`` steps."""
    context, truth = series[:, :-horizon], series[:, -horizon:]
    with torch.no_grad():
        median = model.forecast(context, horizon, naive_blend=blend)[:, model.quantile_levels.index(0.5)]
    naive = seasonal_naive_hint(context, torch.full((len(series),), period), horizon)
    return ((median - truth).abs().mean(1) / (naive - truth).abs().mean(1)).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="a built-in model's name or a checkpoint folder")
    parser.add_argument("--series", type=int, default=48)
    parser.add_argument("--calendars", nargs="+", default=["5min", "30min", "hourly"])
    parser.add_argument("--horizon", type=int, default=720)
    args = parser.parse_args()
    model = load_model(args.model, device="cpu")
    for family in ("weather", "seasonal"):
        for calendar in args.calendars:
            g = torch.Generator().manual_seed(0)
            series = PRIORS[family](args.series, model.config.context_length + args.horizon, g,
                                    calendars=(calendar,))
            period = int(CALENDARS[calendar][0])
            row = {blend: np.exp(np.log(ratios(model, series, period, args.horizon, blend)).mean())
                   for blend in ("inverse_mse", "off")}
            print(f"{family:9s} {calendar:7s} period {period:4d} horizon {args.horizon}: "
                  f"blend on {row['inverse_mse']:.3f}  off {row['off']:.3f}", flush=True)


if __name__ == "__main__":
    main()
