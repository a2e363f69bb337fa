"""Where, 2.5 days ahead, does the default lose to yesterday on `yosemite_temps/5T/long`? For the test windows and the
seven spans before them (24 windows of 720 steps; descriptive, nothing chosen from it), the mean absolute error per
lead time of the default's median (with its shipped blend and without it) and of Seasonal Naive (the last 288 steps
repeated), missing truths skipped, the bias (forecast minus truth) and the daily range (max - min per forecast day)
against the truth's:

    cd /work/main && PYTHONPATH=. .venv/bin/python \
        benchmarks/results/cpu-2026-12-07-session38/five_minute_lead_times.py --benchmark data/benchmark \
        --out benchmarks/results/cpu-2026-12-07-session38/five_minute_lead_times.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from tsfm import load_model
from tsfm.pipelines.data.gift_eval import GiftEvalDataset

DAY = 288


def windows(benchmark: Path, spans: range) -> tuple[np.ndarray, np.ndarray]:
    """``[W, 2048]`` contexts (NaN-padded on the left) and ``[W, 720]`` truths."""
    data = GiftEvalDataset("yosemite_temps/5T", "long", root=benchmark)
    contexts, truths = [], []
    for span in spans:
        for given, label in data.rolling_windows(span):
            past = np.asarray(given["target"], dtype=np.float32)[-2048:]
            contexts.append(np.pad(past, (2048 - past.size, 0), constant_values=np.nan))
            truths.append(np.asarray(label["target"], dtype=np.float32))
    return np.stack(contexts), np.stack(truths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--spans", type=int, default=8)
    args = parser.parse_args()
    context, truth = windows(args.benchmark, range(1, args.spans + 1))
    horizon = truth.shape[1]
    model = load_model("default").eval()
    median = model.quantile_levels.index(0.5)
    tensor = torch.from_numpy(context)
    forecasts = {
        "default (blend)": model.forecast(tensor, horizon)[:, median].numpy(),
        "default, no blend": model.forecast(tensor, horizon, naive_blend="off")[:, median].numpy(),
        "Seasonal Naive": np.tile(context[:, -DAY:], (1, -(-horizon // DAY)))[:, :horizon],
    }
    errors = {name: np.abs(f - truth) for name, f in forecasts.items()}
    days = [slice(d * DAY, min((d + 1) * DAY, horizon)) for d in range(-(-horizon // DAY))]
    print(f"{truth.shape[0]} windows of {horizon} steps; per forecast day (288 steps):")
    print("| forecast | " + " | ".join(f"day {d + 1} MAE | bias | range" for d in range(len(days))) + " |")
    truth_range = [np.nanmean(np.nanmax(truth[:, s], 1) - np.nanmin(truth[:, s], 1)) for s in days]
    for name, f in forecasts.items():
        cells = []
        for d, s in enumerate(days):
            cells += [f"{np.nanmean(errors[name][:, s]):.3f}", f"{np.nanmean(f[:, s] - truth[:, s]):+.3f}",
                      f"{np.nanmean(np.nanmax(f[:, s], 1) - np.nanmin(f[:, s], 1)):.2f} ({truth_range[d]:.2f})"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("(range: mean daily max - min of the forecast, the truth's in brackets)")
    fig, ax = plt.subplots(figsize=(9, 4))
    kernel = np.ones(12) / 12  # one hour
    for name, error in errors.items():
        hourly = np.convolve(np.nanmean(error, 0), kernel, mode="valid")  # centred hourly means, no edge effects
        ax.plot((np.arange(hourly.size) + (kernel.size - 1) / 2) / DAY, hourly, label=name)
    ax.set_xlabel("lead time (days)")
    ax.set_ylabel("mean absolute error (hourly mean)")
    ax.set_title(f"yosemite_temps/5T/long: {truth.shape[0]} windows, test windows and {args.spans - 1} spans before")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
