"""GIFT-Eval's protocol for one configuration: its metric list, how a predictor is scored, and one result row.

Exactly as GIFT-Eval's notebooks do: gluonts ``evaluate_model`` with ``axis=None, batch_size=512,
mask_invalid_label=True, allow_nan_forecast=False, seasonality=get_seasonality(freq)`` and GIFT-Eval's metric
list; rows in the columns and keys of the leaderboard's ``all_results.csv``. gluonts is imported only when a
predictor is scored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from ..data.gift_eval import GiftEvalDataset
from ..predictor import QUANTILE_LEVELS

METRIC_NAMES: tuple[str, ...] = (
    "MSE[mean]",
    "MSE[0.5]",
    "MAE[mean]",
    "MAE[0.5]",
    "MASE[0.5]",
    "MAPE[0.5]",
    "sMAPE[0.5]",
    "MSIS",
    "RMSE[mean]",
    "NRMSE[mean]",
    "ND[0.5]",
    "mean_weighted_sum_quantile_loss",
)
"""gluonts metric names in GIFT-Eval's column order."""

RESULT_COLUMNS: tuple[str, ...] = (
    "dataset",
    "model",
    *(f"eval_metrics/{m}" for m in METRIC_NAMES),
    "domain",
    "num_variates",
)
"""GIFT-Eval's ``all_results.csv`` header, as in the leaderboard's ``results/<model>/all_results.csv``."""

MASE = "eval_metrics/MASE[0.5]"
CRPS = "eval_metrics/mean_weighted_sum_quantile_loss"


DOMAINS: dict[str, str] = {
    # GIFT-Eval's dataset_properties.json (keys after its renames)
    **dict.fromkeys(("m4_yearly", "m4_quarterly", "m4_monthly", "m4_weekly", "m4_daily", "m4_hourly"), "Econ/Fin"),
    **dict.fromkeys(("electricity", "solar", "ett1", "ett2"), "Energy"),
    **dict.fromkeys(("hospital", "covid_deaths", "us_births"), "Healthcare"),
    **dict.fromkeys(("saugeen", "temperature_rain", "kdd_cup_2018", "jena_weather"), "Nature"),
    **dict.fromkeys(("car_parts", "restaurant", "hierarchical_sales"), "Sales"),
    **dict.fromkeys(("loop_seattle", "sz_taxi", "m_dense"), "Transport"),
    **dict.fromkeys(
        ("bitbrains_fast_storage", "bitbrains_rnd", "bizitobs_application", "bizitobs_service", "bizitobs_l2c"),
        "Web/CloudOps",
    ),
    # our offline benchmark, in GIFT-Eval's seven domains
    **dict.fromkeys(("m3_yearly", "m3_quarterly", "m3_monthly", "m3_other", "nn3", "exchange_rate"), "Econ/Fin"),
    **dict.fromkeys(("tourism_yearly", "tourism_quarterly", "tourism_monthly"), "Econ/Fin"),
    **dict.fromkeys(("gefcom2012_load", "vic_elec"), "Energy"),
    "ili": "Healthcare",
    **dict.fromkeys(("nyc_taxi", "pedestrian", "traffic_volume"), "Transport"),
    "yosemite_temps": "Nature",
}
"""Domain of each dataset (the first part of the result key)."""


def gift_eval_metrics() -> list[Any]:
    """GIFT-Eval's metric objects; ``mean_weighted_sum_quantile_loss`` over 0.1-0.9 is what it calls CRPS."""
    from gluonts.ev.metrics import MAE, MAPE, MASE, MSE, MSIS, ND, NRMSE, RMSE, SMAPE, MeanWeightedSumQuantileLoss

    return [
        MSE(forecast_type="mean"),
        MSE(forecast_type=0.5),
        MAE(forecast_type="mean"),
        MAE(),
        MASE(),
        MAPE(),
        SMAPE(),
        MSIS(),
        RMSE(),
        NRMSE(),
        ND(),
        MeanWeightedSumQuantileLoss(quantile_levels=list(QUANTILE_LEVELS)),
    ]


@contextmanager
def _gluonts_progress(desc: str, enabled: bool) -> Iterator[None]:
    """Label (or hide) the bare tqdm bar that ``gluonts.model.evaluation`` opens per call.

    gluonts offers no argument for it, so its module-level ``tqdm`` is swapped for the duration of one call.
    """
    import gluonts.model.evaluation as evaluation
    from tqdm.auto import tqdm

    original = evaluation.tqdm
    evaluation.tqdm = partial(tqdm, desc=desc, unit="series", leave=False, disable=not enabled)
    try:
        yield
    finally:
        evaluation.tqdm = original


def evaluate_predictor(
    predictor: Any, dataset: GiftEvalDataset, *, progress: bool = False, desc: str = "", spans_back: int = 1
) -> dict[str, float]:
    """Score a gluonts predictor on one configuration with GIFT-Eval's arguments; returns ``{metric name: value}``.
    ``spans_back`` 1 scores the test windows; 2 the windows that end where the test windows begin
    (:attr:`GiftEvalDataset.windows_before_test`), 3 the span before those (:meth:`GiftEvalDataset.rolling_windows`).

    Example:
        >>> evaluate_predictor(predictor, GiftEvalDataset.per_variate("m4_hourly", root="bench"))["MASE[0.5]"]
        ... # doctest: +SKIP
        1.1932101877276544
    """
    test_data = dataset.rolling_windows(spans_back)
    # gluonts' evaluate_model is this: the predictor's (lazy) forecasts handed to evaluate_forecasts
    return _score(predictor.predict(test_data.input), test_data, dataset, progress=progress, desc=desc)


def evaluate_forecasts(forecasts: Iterable[Any], dataset: GiftEvalDataset, *, spans_back: int = 1,
                       progress: bool = False, desc: str = "") -> dict[str, float]:
    """Score forecasts already made for one configuration's windows (``spans_back`` as in :func:`evaluate_predictor`,
    in the order of ``dataset.rolling_windows(spans_back).input``) with GIFT-Eval's arguments.

    Apart from :func:`evaluate_predictor` so that the metrics (gluonts on one CPU core, more than half of a pass on a
    GPU machine) can run in another process than the forecasts (``tsfm.pipelines.sweep.score_checkpoint``).
    """
    return _score(forecasts, dataset.rolling_windows(spans_back), dataset, progress=progress, desc=desc)


def _score(forecasts: Iterable[Any], test_data: Any, dataset: GiftEvalDataset, *, progress: bool,
           desc: str) -> dict[str, float]:
    """gluonts' ``evaluate_forecasts`` with GIFT-Eval's arguments on windows already cut (``test_data``)."""
    from gluonts.model.evaluation import evaluate_forecasts as gluonts_evaluate_forecasts

    with _gluonts_progress(desc or dataset.config_key, progress):
        frame = gluonts_evaluate_forecasts(
            forecasts,
            test_data=test_data,
            metrics=gift_eval_metrics(),
            axis=None,
            batch_size=512,
            mask_invalid_label=True,
            allow_nan_forecast=False,
            seasonality=dataset.season_length,
        )
    row = frame.reset_index(drop=True).iloc[0]
    return {name: float(row[name]) for name in METRIC_NAMES}


def domain_of(key: str) -> str:
    """Domain of a result key's dataset; ``"unknown"`` for datasets outside GIFT-Eval and our benchmark."""
    return DOMAINS.get(key.split("/")[0], "unknown")


def result_row(model: str, dataset: GiftEvalDataset, metrics: dict[str, float]) -> dict[str, Any]:
    """One ``all_results.csv`` row."""
    return {
        "dataset": dataset.config_key,
        "model": model,
        **{f"eval_metrics/{name}": metrics[name] for name in METRIC_NAMES},
        "domain": domain_of(dataset.config_key),
        "num_variates": dataset.target_dim,
    }
