"""The leaderboard's aggregation: each configuration's MASE and CRPS divided by Seasonal Naive's, then geometric
means per model, overall, per term and per frequency."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..data.frequency import step_duration
from ..data.gift_eval import Term
from .protocol import CRPS, MASE

NORMALISER = "seasonal_naive"
"""The model every score is divided by, per configuration."""

KEY_PARTS = {"freq": -2, "term": -1}
"""The parts of a result key ``dataset/FREQ/term`` read from its end, by position."""


def key_part(keys: pd.Series | pd.Index, part: str) -> pd.Series | pd.Index:
    """One part (:data:`KEY_PARTS`) of every result key in ``keys``: ``"yosemite_temps/5T/long"`` -> ``"5T"``."""
    return keys.astype(str).str.split("/").str[KEY_PARTS[part]]


def geometric_mean(values: Sequence[float] | np.ndarray | pd.Series) -> float:
    """``exp(mean(log(values)))``, the leaderboard's aggregate of normalised scores.

    Raises:
        ValueError: a value is not finite and positive (a ratio to Seasonal Naive always is, unless a metric broke).
    """
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        raise ValueError("geometric mean of no values")
    bad = ~(np.isfinite(array) & (array > 0))
    if bad.any():
        raise ValueError(f"geometric mean needs finite positive values, got {array[bad]}")
    return float(np.exp(np.mean(np.log(array))))


def paired_ratio_interval(
    scores: Sequence[float] | np.ndarray, reference: Sequence[float] | np.ndarray, *, confidence: float = 0.95,
    resamples: int = 10_000, seed: int = 0,
) -> tuple[float, float, float]:
    """How much lower one model's geometric mean is than a reference's, and how sure: ``(ratio, low, high)``.

    ``ratio`` is ``geometric_mean(scores) / geometric_mean(reference)`` over the same configurations (paired by
    position); ``low`` and ``high`` bound it with a BCa bootstrap over configurations (``scipy.stats.bootstrap`` on
    the per-configuration log ratios). Why: two checkpoints of one lineage differ by 1-3% on a 33-configuration
    benchmark where a few single-series configurations swing by 20%; an interval that contains 1 says the benchmark
    cannot tell them apart, whichever mean is lower.

    Raises:
        ValueError: the two have different lengths, fewer than two configurations, or a value that is not finite
            and positive.
    """
    from scipy.stats import bootstrap

    a, b = np.asarray(scores, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(f"paired scores need two equal 1-D sequences of 2+ values, got shapes {a.shape}, {b.shape}")
    geometric_mean(a), geometric_mean(b)  # the same finite-positive check and message
    log_ratios = np.log(a) - np.log(b)
    ratio = float(np.exp(log_ratios.mean()))
    if np.ptp(log_ratios) == 0:  # every configuration the same ratio: nothing to resample
        return ratio, ratio, ratio
    result = bootstrap((log_ratios,), np.mean, confidence_level=confidence, n_resamples=resamples, method="BCa",
                       rng=np.random.default_rng(seed))
    low, high = result.confidence_interval
    return ratio, float(np.exp(low)), float(np.exp(high))


def normalise(results: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """Per configuration, each model's MASE and CRPS divided by the baseline's (Seasonal Naive) on the same key.

    Args:
        results: ``all_results.csv`` rows of one or more models.
        baseline: the normaliser's rows (one per ``dataset`` key).

    Returns:
        Columns ``dataset``, ``model``, ``term``, ``MASE``, ``CRPS`` (ratios); rows without a baseline value are
        dropped.
    """
    base = baseline.drop_duplicates("dataset", keep="last").set_index("dataset")
    merged = results[results["dataset"].isin(base.index)]
    return pd.DataFrame(
        {
            "dataset": merged["dataset"].to_numpy(),
            "model": merged["model"].to_numpy(),
            "term": key_part(merged["dataset"], "term").to_numpy(),
            "MASE": (merged[MASE] / base.loc[merged["dataset"], MASE].to_numpy()).to_numpy(),
            "CRPS": (merged[CRPS] / base.loc[merged["dataset"], CRPS].to_numpy()).to_numpy(),
        }
    )


def summarise(normalised: pd.DataFrame) -> dict[str, dict[str, dict[str, float]]]:
    """Geometric means of normalised MASE and CRPS per model: ``{model: {"overall"|term: {"MASE", "CRPS", "n"}}}``.

    A ratio that is not finite and positive (a configuration where Seasonal Naive's in-sample error is zero makes
    MASE undefined) is left out of its metric's mean and counted in ``"excluded"``, so one degenerate
    configuration does not void a long run.
    """
    out: dict[str, dict[str, dict[str, float]]] = {}
    for model, rows in normalised.groupby("model", sort=False):
        groups = {"overall": rows, **{t.value: rows[rows["term"] == t.value] for t in Term}}
        out[str(model)] = {name: _means(g) for name, g in groups.items() if len(g)}
    return out


def summarise_by_frequency(normalised: pd.DataFrame) -> dict[str, dict[str, dict[str, float]]]:
    """Geometric means of normalised MASE and CRPS per model and frequency (the middle part of a
    ``name/freq/term`` key): ``{model: {freq: {"MASE", "CRPS", "n"}}}``, the finest frequency first.

    GIFT-Eval's leaderboard breaks results down by frequency too; ``n`` says how many configurations stand behind
    each mean, which on a small benchmark may be one or two datasets of a single series.
    """
    freq = key_part(normalised["dataset"], "freq")
    order = sorted(freq.unique(), key=step_duration)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for model, rows in normalised.groupby("model", sort=False):
        of_rows = freq.loc[rows.index]
        out[str(model)] = {f: _means(rows[of_rows == f]) for f in order if (of_rows == f).any()}
    return out


def _means(rows: pd.DataFrame) -> dict[str, float]:
    result: dict[str, float] = {"n": len(rows)}
    excluded = 0
    for metric in ("MASE", "CRPS"):
        values = rows[metric].to_numpy(dtype=np.float64)
        ok = np.isfinite(values) & (values > 0)
        excluded = max(excluded, int((~ok).sum()))
        result[metric] = geometric_mean(values[ok]) if ok.any() else math.nan
    if excluded:
        result["excluded"] = excluded
    return result
