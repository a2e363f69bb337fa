"""Prototype, not shipped code: the Seasonal-Naive blend with its weight read from two backtest windows instead of one.

``tsfm.naive_blend`` weighs Seasonal Naive by one backtest, the context's last ``h`` steps forecast from the steps
before them. For a short horizon that is few steps (48 of an hourly series), so the weight is noisy. Here the errors of
both models are pooled over two backtests where the context holds them: the last ``h`` steps, and the ``h`` steps
before those (each forecast from the steps before it); a series whose context holds only one keeps the one-window
weight. Everything else is the shipped blend (``inverse_mse``). This script patches ``tsfm.model``'s blend in-process
and runs the sibling scripts, so the scores come from the same code paths as ``scripts/judge_checkpoints.py``:

    PYTHONPATH=.:scripts python benchmarks/results/cpu-2026-12-06-session27/two_origin_prototype.py \
        --judge benchmarks/results/cpu-2026-12-06-session27/judge --reference-name tf10-cont2 \
        --benchmark data/benchmark --real-data data/device/pretrain --out OUT
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from eval_checkpoints import main as score_checkpoints
from validation_forecast import main as validation_forecast

import tsfm.model
from tsfm.naive_blend import backtest_horizon, backtestable
from tsfm.pipelines.evaluate import normalise, paired_ratio_interval, read_results
from tsfm.seasonality import detect_period, seasonal_naive_hint

ORIGINS = 2


def _squared_errors(context: torch.Tensor, period: torch.Tensor, median: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Sums of squared errors of the model's backtest ``median`` and of Seasonal Naive on the context's last steps,
    and the count of steps both observed."""
    horizon = median.shape[1]
    history, truth = context[:, :-horizon], context[:, -horizon:]
    naive = seasonal_naive_hint(history, period, horizon)
    observed = ~torch.isnan(truth) & ~torch.isnan(naive)
    model = torch.where(observed, (median - truth) ** 2, 0.0).sum(1)
    naive_error = torch.where(observed, (naive - truth) ** 2, 0.0).sum(1)
    return model, naive_error, observed.sum(1)


def blend_two_origins(context, quantiles, median_index, how, backtest):
    """The shipped blend's signature; ``inverse_mse`` weights pooled over up to :data:`ORIGINS` backtests."""
    if how == "off":  # the backtests' own forecasts
        return quantiles
    if how != "inverse_mse":
        raise ValueError("the prototype covers inverse_mse only")
    horizon = backtest_horizon(context.shape[1], quantiles.shape[2])
    if horizon < 1:
        return quantiles
    period = detect_period(context)
    model_sum = torch.zeros(context.shape[0], dtype=quantiles.dtype)
    naive_sum, count = torch.zeros_like(model_sum), torch.zeros_like(model_sum)
    usable = torch.zeros(context.shape[0], dtype=torch.bool)
    for origin in range(ORIGINS):
        window = context[:, : context.shape[1] - origin * horizon]
        history = window[:, :-horizon]
        if history.shape[1] < 1:
            break
        rows = torch.nonzero(backtestable(history, period)).flatten()
        if rows.numel() == 0:
            continue
        model, naive, seen = _squared_errors(window[rows], period[rows], backtest(history[rows], horizon))
        model_sum[rows] += model
        naive_sum[rows] += naive
        count[rows] += seen
        usable[rows] |= seen > 0
    total = model_sum + naive_sum
    weight = torch.where(usable & (total > 0), model_sum / total.clamp(min=torch.finfo(total.dtype).tiny), 0.0)
    naive = seasonal_naive_hint(context, period, quantiles.shape[2])
    shift = torch.nan_to_num(naive - quantiles[:, median_index], nan=0.0) * weight[:, None]
    return quantiles + shift[:, None, :]


def judge_arguments(description: str) -> argparse.ArgumentParser:
    """The command line of a blend prototype (this one, and later ones that import :func:`judge_blend`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--judge", type=Path, required=True, help="a judge_checkpoints.py output folder")
    parser.add_argument("--reference-name", required=True, help="the judged candidate with the same weights")
    parser.add_argument("--model", default="default")
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--real-data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    return parser


def main() -> None:
    judge_blend(judge_arguments(__doc__.splitlines()[0]).parse_args(), blend_two_origins, "two-origins")


def judge_blend(args: argparse.Namespace, blend, name: str) -> None:
    """Score the model with ``blend`` patched in for the shipped one, paired against the judged reference."""
    tsfm.model.blend_with_seasonal_naive = blend
    frames, reference = [], []
    for spans in (2, 3):
        judged = args.judge / f"spans_back_{spans}"
        out = args.out / f"spans_back_{spans}"
        score_checkpoints([args.model, "--names", name, "--benchmark", str(args.benchmark), "--out", str(out),
                           "--spans-back", str(spans), "--normaliser", str(judged / "seasonal_naive" /
                                                                            "all_results.csv"), "--device", "cpu"])
        naive = read_results(judged / "seasonal_naive")
        frames.append(normalise(read_results(out / name), naive).assign(spans_back=spans))
        reference.append(normalise(read_results(judged / args.reference_name), naive).assign(spans_back=spans))
    ours = pd.concat(frames).set_index(["dataset", "spans_back"])
    ref = pd.concat(reference).set_index(["dataset", "spans_back"]).loc[ours.index]
    result = {m: paired_ratio_interval(ours[m].to_numpy(), ref[m].to_numpy()) for m in ("MASE", "CRPS")}
    validation_file = args.out / "validation.json"
    validation_forecast([args.model, "--real-data", str(args.real_data), "--validation-split", "common", "--no-flip",
                         "--naive-blends", "inverse_mse", "--out", str(validation_file), "--device", "cpu"])
    ours_rows = {r["infer_nonnegative"]: r for r in json.loads(validation_file.read_text())["rows"]}
    judged_rows = [r for r in json.loads((args.judge / "validation_forecast_common.json").read_text())["rows"]
                   if r["infer_nonnegative"] and r["members"][0]["model"].rstrip("/").endswith(args.reference_name +
                                                                                               "/model")]
    datasets = [k for k in ours_rows[True] if k.startswith("dataset: ")]
    result["held-out"] = paired_ratio_interval(np.array([ours_rows[True][d] for d in datasets]),
                                               np.array([judged_rows[0][d] for d in datasets]))
    result["units"] = len(ours)
    print(json.dumps({k: [round(float(x), 4) for x in v] if isinstance(v, tuple) else v for k, v in result.items()}))
    (args.out / "paired.json").write_text(json.dumps(result, indent=2, default=float) + "\n")


if __name__ == "__main__":
    main()
