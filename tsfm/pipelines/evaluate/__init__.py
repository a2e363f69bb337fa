"""GIFT-Eval's protocol on a benchmark root: forecasts, metrics, ``all_results.csv``, Seasonal-Naive normalisation.

``evaluate(["default", "seasonal_naive"], "bench/")`` scores each model on every configuration of the root (our
offline benchmark's ``benchmark.json``, or the 97 official configurations of a real GIFT-Eval download) exactly as
GIFT-Eval's notebooks do: multivariate data per variate, gluonts ``evaluate_model`` with ``axis=None,
mask_invalid_label=True, allow_nan_forecast=False, seasonality=get_seasonality(freq)``, and GIFT-Eval's metric list.
Each model gets ``OUT/<model>/all_results.csv`` in GIFT-Eval's columns and keys (so our rows sit beside published
ones) and ``OUT/<model>/run.json`` with its wall times, settings, the machine, and its values normalised by Seasonal
Naive with their geometric means (overall and per term), as the leaderboard ranks models.

One module per job, all re-exported here:

* :mod:`.protocol`: scoring one configuration (metric list, gluonts call, result row);
* :mod:`.models`: a model name -> :class:`EvalModel` (baseline, built-in model or checkpoint);
* :mod:`.configs`: which configurations of a root, and their result keys;
* :mod:`.aggregate`: Seasonal-Naive normalisation and geometric means;
* :mod:`.results`: ``all_results.csv`` / ``run.json`` files and the printed summary;
* :mod:`.run`: :func:`evaluate`, the loop over configurations and models.

The gluonts adapter is :mod:`tsfm.pipelines.predictor`, the statistical models :mod:`tsfm.pipelines.baselines`,
tables and plots :mod:`tsfm.pipelines.report`.
"""

from .aggregate import (
    NORMALISER,
    geometric_mean,
    key_part,
    normalise,
    paired_ratio_interval,
    summarise,
    summarise_by_frequency,
)
from .configs import config_keys, select_configs
from .errors import BenchmarkError, EvaluationError, UnknownConfigError, UnknownModelError
from .models import EvalModel, eval_model, with_inference
from .protocol import (
    CRPS,
    DOMAINS,
    MASE,
    METRIC_NAMES,
    RESULT_COLUMNS,
    domain_of,
    evaluate_forecasts,
    evaluate_predictor,
    gift_eval_metrics,
    result_row,
)
from .results import RESULTS_FILE, RUN_FILE, format_summary, machine, read_results
from .run import evaluate

__all__ = [
    "CRPS",
    "DOMAINS",
    "MASE",
    "METRIC_NAMES",
    "NORMALISER",
    "RESULTS_FILE",
    "RESULT_COLUMNS",
    "RUN_FILE",
    "BenchmarkError",
    "EvalModel",
    "EvaluationError",
    "UnknownConfigError",
    "UnknownModelError",
    "config_keys",
    "domain_of",
    "eval_model",
    "evaluate",
    "evaluate_forecasts",
    "evaluate_predictor",
    "format_summary",
    "geometric_mean",
    "gift_eval_metrics",
    "key_part",
    "machine",
    "normalise",
    "paired_ratio_interval",
    "read_results",
    "result_row",
    "select_configs",
    "summarise",
    "summarise_by_frequency",
    "with_inference",
]
