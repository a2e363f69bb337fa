"""What the new default does on the long 5-minute test windows, where it is behind the default before it
(`yosemite_temps/5T/long`: 1.173 against 1.086 x Seasonal Naive), beside the seven spans before them where it is
ahead (0.978 against 1.042). Per group of windows: the median's MAE, bias (forecast minus truth) and mean daily range
(max - min per forecast day; the truth's in brackets) for both models (shipped inference) and Seasonal Naive; and a
picture of the three test windows. Descriptive; scored after the decision, nothing chosen from it.

    mkdir -p /tmp/default-old && for f in config.json model-00001-of-00002.safetensors \
        model-00002-of-00002.safetensors; do git show e566007:tsfm/models/default/$f > /tmp/default-old/$f; done
    PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2026-12-07-session39/five_minute_test_windows.py \
        --benchmark data/benchmark --before /tmp/default-old \
        --out benchmarks/results/cpu-2026-12-07-session39/five_minute_test_windows.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from tsfm import load_model

# the long term's windows, read as session 38's lead-time probe reads them
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cpu-2026-12-07-session38"))
from five_minute_lead_times import DAY, windows

HORIZON = 720


def medians(models: dict[str, str | Path], context: np.ndarray) -> dict[str, np.ndarray]:
    """Each model's median forecast (its shipped inference) and Seasonal Naive's (the last day repeated)."""
    out = {}
    for name, path in models.items():
        model = load_model(path).eval()
        out[name] = model.forecast(torch.from_numpy(context), HORIZON)[:, model.quantile_levels.index(0.5)].numpy()
    out["Seasonal Naive"] = np.tile(context[:, -DAY:], (1, -(-HORIZON // DAY)))[:, :HORIZON]
    return out


def table(title: str, forecasts: dict[str, np.ndarray], truth: np.ndarray) -> None:
    days = [slice(d * DAY, min((d + 1) * DAY, HORIZON)) for d in range(-(-HORIZON // DAY))]
    truth_range = [np.nanmean(np.nanmax(truth[:, s], 1) - np.nanmin(truth[:, s], 1)) for s in days]
    print(f"{title} ({truth.shape[0]} windows); per forecast day: MAE | bias | daily range (truth's)")
    for name, f in forecasts.items():
        cells = [f"{np.nanmean(np.abs(f[:, s] - truth[:, s])):.2f} | {np.nanmean(f[:, s] - truth[:, s]):+.2f} | "
                 f"{np.nanmean(np.nanmax(f[:, s], 1) - np.nanmin(f[:, s], 1)):.1f} ({truth_range[d]:.1f})"
                 for d, s in enumerate(days)]
        print(f"  {name:24s} " + "   ".join(cells) + f"   all days MAE {np.nanmean(np.abs(f - truth)):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--before", type=Path, required=True, help="the default before this session's")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    models = {"default (session 39)": "default", "default before it": args.before}
    test_context, test_truth = windows(args.benchmark, range(1, 2))
    before_context, before_truth = windows(args.benchmark, range(2, 9))
    test = medians(models, test_context)
    table("test windows (span 1)", test, test_truth)
    table("spans 2-8", medians(models, before_context), before_truth)
    fig, axes = plt.subplots(len(test_truth), 1, figsize=(11, 2.8 * len(test_truth)), sharex=True)
    shown = 2 * DAY  # context steps shown before each forecast
    for w, ax in enumerate(np.atleast_1d(axes)):
        ax.plot(np.arange(-shown, 0), test_context[w, -shown:], color="black", lw=0.8, label="context")
        ax.plot(np.arange(HORIZON), test_truth[w], color="black", lw=0.8, ls=":", label="truth")
        for name, f in test.items():
            ax.plot(np.arange(HORIZON), f[w], lw=1.0, label=name)
        ax.set_title(f"test window {w + 1}", fontsize=9, loc="left")
    np.atleast_1d(axes)[0].legend(fontsize=8, ncol=5, loc="upper right")
    np.atleast_1d(axes)[-1].set_xlabel("steps from the forecast start (5 minutes; a day is 288)")
    fig.suptitle("yosemite_temps/5T/long, the three test windows: medians with the shipped inference")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
