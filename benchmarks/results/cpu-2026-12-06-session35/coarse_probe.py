"""Does forecasting a coarser copy of a high-frequency series help its long horizons? ``yosemite_temps/5T`` (or the
``--configs`` named) medium and long terms, windows before the test windows (spans back 2 and 3; the
test windows are not read): the shipped default forecast at the native resolution, against the same model fed the
series averaged over blocks of ``k`` steps (a context ``k`` times longer in time), its forecast spread back over the
blocks by linear interpolation between block centres; and their average. Prints the median's MAE over Seasonal
Naive's (the benchmark's season) per configuration, geometric mean over windows:

    cd /work/main && PYTHONPATH=.:benchmarks/results/cpu-2026-12-06-session34 .venv/bin/python \
        benchmarks/results/cpu-2026-12-06-session35/coarse_probe.py --benchmark data/benchmark --factors 3 12
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from yosemite_period import yosemite_windows

from tsfm.checkpoint import load_model
from tsfm.seasonality import seasonal_naive_hint


def block_means(series: np.ndarray, k: int) -> np.ndarray:
    """NaN-aware means of whole blocks of ``k`` steps, the last block ending at the last step."""
    usable = len(series) // k * k
    blocks = series[len(series) - usable :].reshape(-1, k)
    with np.errstate(all="ignore"):
        return np.nanmean(blocks, axis=1)


def spread_back(last_block: float, coarse: np.ndarray, k: int, horizon: int) -> np.ndarray:
    """Fine steps ``1..horizon`` from block means: linear between block centres, from the last context block's on."""
    centres = np.arange(len(coarse) + 1) * k - (k - 1) / 2  # block j's centre; step 0 is the context's last
    return np.interp(np.arange(1, horizon + 1), centres, np.concatenate([[last_block], coarse]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--model", default="default", help="a built-in model's name or a checkpoint folder")
    parser.add_argument("--factors", type=int, nargs="*", default=[3, 12], help="none: the native forecast only")
    args = parser.parse_args()
    model = load_model(args.model, device="cpu")
    length = model.config.context_length
    median = model.quantile_levels.index(0.5)
    ratios: dict[str, dict[str, list[float]]] = {}
    # the whole history each coarse copy can use: `length` blocks of the largest factor
    for term, _, _, history, truth, season in yosemite_windows(args.benchmark, length * max(args.factors, default=1)):
        series, truth, horizon = history[0].numpy(), truth.numpy(), truth.shape[0]
        context = history[:, -length:]
        with torch.no_grad():
            native = model.forecast(context, horizon)[0, median].numpy()
        naive = seasonal_naive_hint(context, torch.tensor([season]), horizon)[0].numpy()
        seen = ~np.isnan(truth)
        found = {"native": native}
        for k in args.factors:
            coarse_series = block_means(series, k)[-length:]
            with torch.no_grad():
                coarse = model.forecast(torch.tensor(coarse_series)[None], -(-horizon // k))[0, median].numpy()
            found[f"coarse{k}"] = spread_back(float(coarse_series[-1]), coarse, k, horizon)
            found[f"mean{k}"] = (found[f"coarse{k}"] + native) / 2
        mae_naive = np.abs(naive - truth)[seen].mean()
        for key, forecast in found.items():
            ratios.setdefault(term, {}).setdefault(key, []).append(np.abs(forecast - truth)[seen].mean() / mae_naive)
    for term, by_key in ratios.items():
        summary = "  ".join(f"{k} {np.exp(np.mean(np.log(v))):.3f}" for k, v in by_key.items())
        print(f"yosemite_temps/5T/{term} ({len(by_key['native'])} windows): {summary}", flush=True)


if __name__ == "__main__":
    main()
