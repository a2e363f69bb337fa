"""Three inference changes to the shipped default, each scored on the windows before the test windows (spans back 2
and 3, as the judge) and paired with the judge's own reference scores of the unchanged default on the same windows:

- ``--spread F ...``: every forecast's quantiles moved away from (F > 1) or towards (F < 1) its median by the factor F,
  after the blend: are the default's quantiles too narrow or too wide? MASE reads the median, which does not move.
- ``--context-ensemble S ...``: the mean of the quantiles forecast from the whole context and from its last S steps
  (each with its own blend); series no longer than S are forecast as before. The backtest inside the blend is left
  alone.
- ``--amplitude MAX ...``: where the blend can backtest (a season and enough history), the model's forecast is first
  stretched around its own mean by how much its backtest median damped the context's last steps (the slope of the
  truth's deviations on the median's, clamped to [1, MAX]: damping undone, never added), then blended as shipped.

    cd /work/main && PYTHONPATH=.:scripts .venv/bin/python \
        benchmarks/results/cpu-2026-12-07-session38/inference_probe.py --benchmark data/benchmark \
        --judge benchmarks/results/cpu-2026-12-07-session37/judge-runs \
        --out /tmp/inference-probe [--spread 0.85 1.15] [--context-ensemble 512] [--amplitude 1.25] [--spans 2 3]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch
from eval_checkpoints import main as score_checkpoints

from tsfm.model import Forecaster
from tsfm.naive_blend import backtest_horizon, backtestable
from tsfm.pipelines.evaluate import normalise, paired_ratio_interval, read_results
from tsfm.seasonality import detect_period

SETTINGS = ["--decoding", "masked", "--infer-nonnegative", "on", "--naive-blend", "inverse_mse"]


def spread(factor: float) -> Callable[[], None]:
    blend = Forecaster.blend_with_seasonal_naive

    def spread_blend(self, context, quantiles, decoding, how):
        out = blend(self, context, quantiles, decoding, how)
        median = out[:, self._median_index:self._median_index + 1]
        return median + factor * (out - median)

    def patch() -> None:
        Forecaster.blend_with_seasonal_naive = spread_blend
    return patch


def context_ensemble(steps: int) -> Callable[[], None]:
    forecast = Forecaster.forecast

    def ensemble(self, context, prediction_length, decoding=None, scale=None, infer_nonnegative=None,
                 naive_blend=None):
        whole = forecast(self, context, prediction_length, decoding, scale, infer_nonnegative, naive_blend)
        if naive_blend == "off" or scale is not None or context.shape[-1] <= steps:
            return whole  # the blend's own backtest, a stream, or nothing shorter to read
        short = forecast(self, context[..., -steps:], prediction_length, decoding, None, infer_nonnegative,
                         naive_blend)
        return (whole + short) / 2

    def patch() -> None:
        Forecaster.forecast = ensemble
    return patch


def amplitude(largest: float) -> Callable[[], None]:
    blend = Forecaster.blend_with_seasonal_naive

    def stretch_then_blend(self, context, quantiles, decoding, how):
        horizon = backtest_horizon(context.shape[1], quantiles.shape[2])
        if how == "off" or horizon < 1:
            return blend(self, context, quantiles, decoding, how)
        history = context[:, :-horizon]
        rows = torch.nonzero(backtestable(history, detect_period(context))).flatten()
        if rows.numel():
            median = self._median_index
            backtest = self.forecast(history[rows], horizon, decoding, infer_nonnegative=False,
                                     naive_blend="off")[:, median]
            truth = context[rows, -horizon:]
            seen = ~torch.isnan(truth)
            count = seen.sum(1, keepdim=True).clamp(min=1)
            model_dev = torch.where(seen, backtest, 0.0) - (torch.where(seen, backtest, 0.0).sum(1, True) / count)
            truth_dev = torch.where(seen, truth, 0.0) - (torch.where(seen, truth, 0.0).sum(1, True) / count)
            model_dev, truth_dev = model_dev * seen, truth_dev * seen
            slope = (model_dev * truth_dev).sum(1) / (model_dev ** 2).sum(1).clamp(min=1e-12)
            slope = slope.nan_to_num(1.0).clamp(1.0, largest)
            forecast = quantiles[rows, median]
            quantiles = quantiles.clone()
            quantiles[rows] += ((slope[:, None] - 1) * (forecast - forecast.mean(1, keepdim=True)))[:, None, :]
        return blend(self, context, quantiles, decoding, how)

    def patch() -> None:
        Forecaster.blend_with_seasonal_naive = stretch_then_blend
    return patch


def probe(name: str, patch: Callable[[], None], args: argparse.Namespace) -> None:
    blend, forecast = Forecaster.blend_with_seasonal_naive, Forecaster.forecast
    patch()
    try:
        frames = []
        for spans in args.spans:
            judged = args.judge / f"spans_back_{spans}"
            out = args.out / f"spans_back_{spans}"
            score_checkpoints(["default", "--names", name, "--benchmark", str(args.benchmark), "--out", str(out),
                               "--spans-back", str(spans), "--device", "cpu", "--normaliser",
                               str(judged / "seasonal_naive" / "all_results.csv"), *SETTINGS])
            results = pd.concat([read_results(out / name), read_results(judged / "reference")])
            frames.append(normalise(results, read_results(judged / "seasonal_naive")).assign(spans_back=spans))
    finally:
        Forecaster.blend_with_seasonal_naive, Forecaster.forecast = blend, forecast
    scores = pd.concat(frames).set_index(["model", "dataset", "spans_back"])
    changed, reference = scores.loc[name], scores.loc["reference"]
    units = changed.index.intersection(reference.index)
    print(f"{name}: {len(units)} configuration-spans, paired ratio to the unchanged default [95%]:")
    for metric in ("MASE", "CRPS"):
        ratio, low, high = paired_ratio_interval(changed.loc[units, metric].to_numpy(),
                                                 reference.loc[units, metric].to_numpy())
        print(f"  {metric} {ratio:.4f} [{low:.4f}, {high:.4f}]", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--judge", type=Path, required=True, help="a judge_checkpoints.py output folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--spread", type=float, nargs="*", default=[])
    parser.add_argument("--context-ensemble", type=int, nargs="*", default=[])
    parser.add_argument("--amplitude", type=float, nargs="*", default=[])
    parser.add_argument("--spans", type=int, nargs="+", default=[2, 3])
    args = parser.parse_args()
    for factor in args.spread:
        probe(f"spread-{factor}", spread(factor), args)
    for steps in args.context_ensemble:
        probe(f"context-ensemble-{steps}", context_ensemble(steps), args)
    for largest in args.amplitude:
        probe(f"amplitude-{largest}", amplitude(largest), args)


if __name__ == "__main__":
    main()
