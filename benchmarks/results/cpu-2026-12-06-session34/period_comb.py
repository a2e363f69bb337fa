"""Prototype: the detected period refined by the autocorrelation at all its multiples (a comb), measured against the
benchmark's own season lengths on every configuration's windows before the test windows. No model is run.

The ``detect_period`` shipped before this session took the shortest autocorrelation peak near the strongest (its
rule up to its last step, ``_refine_by_multiples``, which this prototype led to); on a smooth daily cycle
(``yosemite_temps/5T``) that peak is broad, and day-to-day changes move its top by 1-11 steps (277-287 for a 288-step
day), so Seasonal Naive built on it drifts out of phase over a long horizon. The peaks at 2, 3, ... times the period
shift k times as far for a wrong period, so the candidate (within ``p / 8`` of the detected ``p``) whose multiples
have the highest mean autocorrelation is a sharper estimate.

    cd /work/main && PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2026-12-06-session34/period_comb.py \
        --benchmark data/benchmark
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

import tsfm.seasonality as seasonality
from tsfm.pipelines.data.gift_eval import GiftEvalDataset
from tsfm.pipelines.evaluate.configs import config_keys, select_configs

CONTEXT = 2048


def autocorrelation(context: torch.Tensor, limit: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, limit + 2]`` autocorrelation of the detrended observed steps and whether each lag has enough pairs
    (as ``detect_period`` computes them)."""
    length = context.shape[1]
    x = context.float()
    observed = ~torch.isnan(x)
    weight = observed.float()
    count = weight.sum(1, keepdim=True).clamp(min=1.0)
    t = torch.arange(length, dtype=torch.float32)[None]
    values = torch.where(observed, x, torch.zeros_like(x))
    t_mean, v_mean = (t * weight).sum(1, keepdim=True) / count, values.sum(1, keepdim=True) / count
    dt = (t - t_mean) * weight
    slope = (dt * (values - v_mean)).sum(1, keepdim=True) / (dt * dt).sum(1, keepdim=True).clamp(min=1e-12)
    residual = torch.where(observed, values - v_mean - slope * (t - t_mean), torch.zeros_like(x))
    sums = seasonality._autocovariance(residual, 2 * length)[:, : limit + 2]
    pairs = seasonality._autocovariance(weight, 2 * length)[:, : limit + 2].round()
    acf = (sums / pairs.clamp(min=1.0)) / (sums[:, :1] / pairs[:, :1].clamp(min=1.0)).clamp(min=1e-12)
    return acf, pairs >= torch.arange(limit + 2)[None]


def refine_by_comb(context: torch.Tensor, period: torch.Tensor) -> torch.Tensor:
    """``period [B]`` moved to the candidate within ``p // 8`` whose multiples (up to half the context) have the
    highest mean autocorrelation; 0 stays 0."""
    limit = context.shape[1] // 2
    acf, enough = autocorrelation(context, limit)
    out = period.clone()
    for row in torch.nonzero(period > 0).flatten().tolist():
        p = int(period[row])
        width = max(1, p // 8)
        best, best_score = p, -2.0
        for q in range(max(seasonality.MIN_PERIOD, p - width), min(limit, p + width) + 1):
            lags = torch.arange(q, limit + 1, q)
            usable = lags[enough[row, lags]]
            if len(usable) == 0:
                continue
            score = float(acf[row, usable].mean())
            if score > best_score + 1e-9 or (abs(score - best_score) <= 1e-9 and abs(q - p) < abs(best - p)):
                best, best_score = q, score
        out[row] = best
    return out


def mae_ratio(context: torch.Tensor, truth: torch.Tensor, reference: torch.Tensor, period: torch.Tensor) -> float:
    """MAE of Seasonal Naive on ``period`` over the rows with one, divided by the season length's (``reference``)."""
    found = period > 0
    if not found.any():
        return float("nan")
    naive = seasonality.seasonal_naive_hint(context[found], period[found], truth.shape[1])
    return float((naive - truth[found]).abs().nanmean() / (reference[found] - truth[found]).abs().nanmean())


def unrefined_period(context: torch.Tensor) -> torch.Tensor:
    """``detect_period`` as shipped before this session: without its refinement by the multiples."""
    refine = seasonality._refine_by_multiples
    seasonality._refine_by_multiples = lambda period, *_: period
    try:
        return seasonality.detect_period(context)
    finally:
        seasonality._refine_by_multiples = refine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    args = parser.parse_args()
    chosen = select_configs(str(args.benchmark), None)
    keys = config_keys(str(args.benchmark), chosen)
    print("| configuration | season | windows | found: shipped / comb (0 = none) | exact: shipped / comb | "
          "SN MAE ratio to the season's: shipped / comb |")
    print("|---|--:|--:|---|---|---|")
    for name, term in chosen:
        dataset = GiftEvalDataset.per_variate(name, term, root=str(args.benchmark))
        season = dataset.season_length
        rows = []
        for spans in (2, 3):
            try:
                rows += list(dataset.rolling_windows(spans))
            except Exception:  # too short for that span
                continue
        contexts, truths = [], []
        for inp, label in rows:
            c = np.asarray(inp["target"], dtype=np.float32)[-CONTEXT:]
            contexts.append(np.concatenate([np.full(CONTEXT - len(c), np.nan, np.float32), c]))
            truths.append(np.asarray(label["target"], dtype=np.float32))
        if not contexts:
            continue
        context = torch.tensor(np.stack(contexts))
        truth = torch.tensor(np.stack(truths))
        shipped = unrefined_period(context)
        comb = refine_by_comb(context, shipped)
        reference = seasonality.seasonal_naive_hint(context, torch.full_like(shipped, season), truth.shape[1])

        print(f"| `{keys[(name, term)]}` | {season} | {len(rows)} | {int((shipped > 0).sum())} / "
              f"{int((comb > 0).sum())} | {int((shipped == season).sum())} / {int((comb == season).sum())} | "
              f"{mae_ratio(context, truth, reference, shipped):.3f} / "
              f"{mae_ratio(context, truth, reference, comb):.3f} |", flush=True)


if __name__ == "__main__":
    main()
