"""Where does the default lose to AutoTheta on short low-frequency series? On the windows before the test windows
(spans back 2; the test windows are not read), per configuration: each model's MAE relative to the naive forecast's,
and how far its median moves from the last observed value compared with how far the truth moves (the slope each
forecast extrapolates, as a share of the one that came):

    cd /work/main && PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2026-12-07-session37/low_frequency_probe.py \
        --benchmark data/benchmark --model default
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from statsforecast import StatsForecast
from statsforecast.models import AutoTheta

from tsfm.checkpoint import load_model
from tsfm.pipelines.data.frequency import seasonality
from tsfm.pipelines.data.gift_eval import GiftEvalDataset

CONFIGS = ["m3_yearly", "m3_other", "m3_quarterly", "tourism_quarterly", "m3_monthly", "nn3"]


def windows(benchmark: Path, name: str) -> tuple[list[np.ndarray], np.ndarray, str]:
    """The short term's windows two spans back: contexts (ragged) and truths ``[N, H]``."""
    dataset = GiftEvalDataset.per_variate(name, "short", root=benchmark)
    contexts, truths = [], []
    for given, label in dataset.rolling_windows(spans_back=2):
        contexts.append(np.asarray(given["target"], dtype=np.float64))
        truths.append(np.asarray(label["target"], dtype=np.float64))
    return contexts, np.stack(truths), dataset.freq


def model_median(model, contexts: list[np.ndarray], horizon: int) -> np.ndarray:
    """The default's median with its shipped inference, contexts left-padded with NaN into one batch."""
    width = max(len(c) for c in contexts)
    batch = torch.full((len(contexts), width), float("nan"))
    for row, context in enumerate(contexts):
        batch[row, width - len(context):] = torch.as_tensor(context, dtype=torch.float32)
    with torch.no_grad():
        quantiles = model.forecast(batch, horizon)
    return quantiles[:, model.quantile_levels.index(0.5)].numpy().astype(np.float64)


def theta_median(contexts: list[np.ndarray], horizon: int, freq: str) -> np.ndarray:
    """AutoTheta (statsforecast) point forecasts, with the benchmark's season."""
    frames = [pd.DataFrame({"unique_id": i, "ds": np.arange(len(c)), "y": c}) for i, c in enumerate(contexts)]
    fitted = StatsForecast(models=[AutoTheta(season_length=seasonality(freq))], freq=1, n_jobs=1)
    out = fitted.forecast(df=pd.concat(frames), h=horizon)
    return out.sort_values(["unique_id", "ds"])["AutoTheta"].to_numpy().reshape(len(contexts), horizon)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--model", default="default")
    args = parser.parse_args()
    model = load_model(args.model, device="cpu")
    print("configuration | windows | context length (median) | MAE / naive's: model, AutoTheta | "
          "move / truth's move (median over windows): model, AutoTheta | model's MAE / AutoTheta's where the truth "
          "moves by more than one scale (windows)")
    for name in CONFIGS:
        contexts, truth, freq = windows(args.benchmark, name)
        horizon = truth.shape[1]
        last = np.array([c[-1] for c in contexts])[:, None]
        scale = np.array([np.mean(np.abs(np.diff(c))) if len(c) > 1 else np.nan for c in contexts])
        forecasts = {"model": model_median(model, contexts, horizon), "theta": theta_median(contexts, horizon, freq)}
        naive_mae = np.abs(truth - last).mean(axis=1)
        truth_move = (truth - last).mean(axis=1)
        moved = np.abs(truth_move) > scale
        cells = []
        for forecast in forecasts.values():
            mae = np.abs(forecast - truth).mean(axis=1)
            cells.append((mae.mean() / naive_mae.mean(), np.median((forecast - last).mean(axis=1)[moved]
                                                                      / truth_move[moved]), mae))
        ratio_moved = cells[0][2][moved].mean() / cells[1][2][moved].mean()
        print(f"{name} | {len(contexts)} | {int(np.median([len(c) for c in contexts]))} | "
              f"{cells[0][0]:.3f}, {cells[1][0]:.3f} | {cells[0][1]:.2f}, {cells[1][1]:.2f} | "
              f"{ratio_moved:.3f} ({int(moved.sum())})", flush=True)


if __name__ == "__main__":
    main()
