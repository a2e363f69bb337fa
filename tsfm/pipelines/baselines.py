"""Statistical baselines as gluonts predictors: Naive, Seasonal Naive, AutoETS, AutoARIMA, AutoTheta (statsforecast).

They go through the same protocol as our models (``tsfm.pipelines.evaluate``): a gluonts ``Predictor`` returning one
``QuantileForecast`` per test instance with keys ``"0.1"`` ... ``"0.9"`` and ``"mean"``. As in GIFT-Eval's
``StatsForecastPredictor``:

- quantiles come from statsforecast's symmetric prediction intervals: level ``q < 0.5`` is the lower end of the
  ``200 x (0.5 - q)`` % interval (``0.1 -> lo-80``), ``q > 0.5`` the upper end of the ``200 x (q - 0.5)`` % one, and
  ``0.5`` the point forecast;
- missing values are filled with gluonts' ``LastValueImputation`` before fitting;
- ``season_length`` is gluonts' ``get_seasonality(freq)``, the MASE season;
- a model that fails or returns NaN is replaced by Seasonal Naive for that series (we also replace infinite values,
  which gluonts turns into NaN quantiles and rejects, and exploded ones: see :data:`EXPLOSION_FACTOR`).

Seasonal Naive here is the *normaliser* of GIFT-Eval's leaderboard: its CRPS uses statsforecast's intervals
(``m4_hourly/H/short``: 0.038, as published), whereas gluonts' one-sample ``SeasonalNaivePredictor`` (the golden MASE
check in ``tsfm.pipelines.data.baseline_check``) has no spread and scores 0.048. Point forecasts, hence MASE, agree.

Our settings for a 2-core CPU (GIFT-Eval publishes none; all are in :data:`BASELINES` and in each ``run.json``):

- Naive and Seasonal Naive read the full history: their interval widths come from in-sample residuals, as in
  GIFT-Eval, and they cost nothing.
- AutoETS reads the last 500 steps, AutoTheta the last 1000, AutoARIMA the last 300, and each at least two
  prediction lengths. Their cost grows with length (ETT and GEFCom have 17k-40k hourly steps, refitted for every
  rolling window) while 300-1000 steps still hold 12-40 daily seasons of hourly data; with the full history and
  default settings, AutoARIMA took 40-60 s per hourly window here. The two horizons matter for the long terms: from
  300 steps, a differenced model's drift extrapolated over 720 steps ran away (nyc_taxi/30T/long: 5.5 x Seasonal
  Naive's MASE, 0.95 with 1440 steps).
- AutoARIMA uses R's ``approximation`` (conditional sums of squares during the order search, which R's
  ``auto.arima`` turns on by itself for series longer than 150 or seasons above 12) and a stepwise search over
  ``p, q <= 3`` and ``P, Q <= 1``; seasons above :data:`ARIMA_MAX_SEASON` (``5T``: 288) are removed by STL first.
  Measured on m4_hourly windows: 0.7 s per window, against 2.5 s with 1000 steps and the default orders.
- AutoETS takes seasons above :data:`ETS_MAX_SEASON` (24) out by STL first, as AutoARIMA does above 48.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np
import pandas as pd
from gluonts.model.forecast import QuantileForecast
from gluonts.model.predictor import Predictor
from gluonts.transform.feature import LastValueImputation

from .predictor import QUANTILE_LEVELS, make_quantile_forecast

__all__ = [
    "ARIMA_MAX_SEASON",
    "BASELINES",
    "ETS_MAX_SEASON",
    "EXPLOSION_FACTOR",
    "BaselineSpec",
    "StatsForecastPredictor",
    "describe",
    "interval_columns",
    "make_baseline",
]

ALIAS = "model"
"""statsforecast column name of every baseline's forecast (``model``, ``model-lo-80``, ...)."""

ARIMA_MAX_SEASON = 48
"""Longest season AutoARIMA fits seasonally (half-hourly data's 48); longer seasons (``5T``: 288) are removed by STL
first (statsforecast ``MSTL`` with an AutoARIMA trend forecaster): a seasonal ARIMA with ``m = 288`` is impractical,
and a non-seasonal one ignores the daily cycle (yosemite_temps/5T/medium: 97 x Seasonal Naive's MASE)."""

ETS_MAX_SEASON = 24
"""ETS models seasons up to 24 (statsforecast, like R's ``ets``); longer seasons (``30T``: 48, ``5T``: 288) are
removed by STL first and a non-seasonal AutoETS forecasts the rest (statsforecast ``MSTL``). Left to itself,
statsforecast drops such seasons after a slow detour, and the non-seasonal trend ran away on long horizons
(yosemite_temps/5T/medium: 75 x Seasonal Naive's MASE)."""

EXPLOSION_FACTOR = 1e3
"""A forecast larger in magnitude than this many times the largest observed value counts as failed (it is redone with
Seasonal Naive, like a NaN one). ETS with multiplicative terms can explode without overflowing: one pedestrian window
reached 5e12 times Seasonal Naive's CRPS."""


def _naive(season_length: int) -> Any:
    from statsforecast.models import Naive

    return Naive(alias=ALIAS)


def _seasonal_naive(season_length: int) -> Any:
    from statsforecast.models import SeasonalNaive

    return SeasonalNaive(season_length=season_length, alias=ALIAS)


def _auto_ets(season_length: int) -> Any:
    from statsforecast.models import MSTL, AutoETS

    if season_length > ETS_MAX_SEASON:  # STL removes the season, a non-seasonal AutoETS forecasts the rest
        return MSTL(season_length=season_length, trend_forecaster=AutoETS(model="ZZN"), alias=ALIAS)
    return AutoETS(season_length=season_length, alias=ALIAS)


def _auto_theta(season_length: int) -> Any:
    from statsforecast.models import AutoTheta

    return AutoTheta(season_length=season_length, alias=ALIAS)


def _auto_arima(season_length: int) -> Any:
    from statsforecast.models import MSTL, AutoARIMA

    if season_length > ARIMA_MAX_SEASON:  # STL removes the season, a non-seasonal AutoARIMA forecasts the rest
        trend = AutoARIMA(approximation=True, max_p=3, max_q=3)
        return MSTL(season_length=season_length, trend_forecaster=trend, alias=ALIAS)
    return AutoARIMA(
        season_length=season_length, approximation=True, max_p=3, max_q=3, max_P=1, max_Q=1, alias=ALIAS
    )


@dataclass(frozen=True)
class BaselineSpec:
    """A statistical baseline: how to build the statsforecast model and how much history it reads.

    Attributes:
        name: GIFT-Eval's result name (``seasonal_naive``, ``auto_arima``, ...).
        build: ``season_length -> statsforecast model``.
        max_context: last steps of each series given to the model (``None``: all) ...
        min_horizons: ... but at least this many prediction lengths.
        settings: human-readable settings for ``run.json`` and the report.
    """

    name: str
    build: Callable[[int], Any]
    max_context: int | None = None
    min_horizons: int = 0
    settings: dict[str, Any] = field(default_factory=dict)

    def context_length(self, prediction_length: int) -> int | None:
        """Steps of history the model reads for this horizon (``None``: all)."""
        if self.max_context is None:
            return None
        return max(self.max_context, self.min_horizons * prediction_length)


BASELINES: dict[str, BaselineSpec] = {
    spec.name: spec
    for spec in (
        BaselineSpec("naive", _naive, None, {"history": "full"}),
        BaselineSpec("seasonal_naive", _seasonal_naive, None, {"history": "full"}),
        BaselineSpec("auto_ets", _auto_ets, 500, 2, {
            "history": "last max(500, 2 x prediction_length) steps",
            "season": f"<= {ETS_MAX_SEASON}, else STL + non-seasonal AutoETS (MSTL)",
        }),
        BaselineSpec("auto_arima", _auto_arima, 300, 2, {
            "history": "last max(300, 2 x prediction_length) steps",
            "approximation": True,
            "orders": "p, q <= 3; P, Q <= 1; stepwise",
            "season": f"<= {ARIMA_MAX_SEASON}, else STL + non-seasonal AutoARIMA (MSTL)",
        }),
        BaselineSpec("auto_theta", _auto_theta, 1000, 2, {"history": "last max(1000, 2 x prediction_length) steps"}),
    )
}
"""The five baselines by name; every one falls back to Seasonal Naive on failure, NaN, inf or explosion."""


def describe(name: str) -> dict[str, Any]:
    """The settings of baseline ``name`` (for results files and reports)."""
    spec = BASELINES[name]
    return {"library": "statsforecast", "max_context": spec.max_context, "min_horizons": spec.min_horizons,
            **spec.settings}


def interval_columns(quantile_levels: Sequence[float]) -> tuple[list[int], list[str]]:
    """statsforecast interval levels to request and, per quantile level, the column that holds it.

    >>> interval_columns([0.1, 0.5, 0.9])
    ([80], ['model-lo-80', 'model', 'model-hi-80'])
    """
    levels: set[int] = set()
    columns = []
    for q in quantile_levels:
        width = round(200 * abs(float(q) - 0.5))
        if width == 0:
            columns.append(ALIAS)
            continue
        levels.add(width)
        columns.append(f"{ALIAS}-{'hi' if q > 0.5 else 'lo'}-{width}")
    return sorted(levels), columns


def _impute(target: Any) -> np.ndarray:
    values = np.asarray(target, dtype=np.float64)
    if np.isnan(values).any():
        values = LastValueImputation()(values.copy())
    return np.atleast_1d(values)


class StatsForecastPredictor(Predictor):
    """A gluonts ``Predictor`` for one statsforecast baseline of :data:`BASELINES`.

    Args:
        name: a key of :data:`BASELINES`.
        prediction_length: steps to forecast.
        season_length: the data's season (``get_seasonality(freq)``).
        quantile_levels: levels returned as forecast keys.
        batch_size: entries fitted per ``StatsForecast.forecast`` call.
        n_jobs: processes statsforecast fits in parallel (``-1``: all cores).

    Time stamps are not given to statsforecast (``ds`` is the step index, ``freq=1``): the models use only
    ``season_length``, and integer steps avoid pandas' changing frequency aliases. Forecast start dates come from
    the gluonts entries.
    """

    def __init__(
        self,
        name: str,
        prediction_length: int,
        season_length: int,
        *,
        quantile_levels: Sequence[float] = QUANTILE_LEVELS,
        batch_size: int = 512,
        n_jobs: int = 1,
    ) -> None:
        if name not in BASELINES:
            raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")
        super().__init__(prediction_length=prediction_length)
        self.name = name
        self.spec = BASELINES[name]
        self.season_length = int(season_length)
        self.quantile_levels = tuple(float(q) for q in quantile_levels)
        self.batch_size = batch_size
        self.n_jobs = n_jobs

    def predict(self, dataset: Iterable[dict[str, Any]], **kwargs: Any) -> Iterator[QuantileForecast]:
        """Yield one ``QuantileForecast`` per entry of ``dataset``, in order."""
        it = iter(dataset)
        while chunk := list(islice(it, self.batch_size)):
            values = self._forecast([_impute(e["target"]) for e in chunk])  # [N, H, Q + 1]
            for entry, v in zip(chunk, values, strict=True):
                yield make_quantile_forecast(v[:, :-1], self.quantile_levels, entry, mean=v[:, -1])

    def _forecast(self, series: list[np.ndarray]) -> np.ndarray:
        """``[N, H, Q + 1]``: the quantiles, then the point forecast; rows with NaN, inf (gluonts rejects both) or
        values beyond :data:`EXPLOSION_FACTOR` times the series' largest magnitude are redone with Seasonal Naive."""
        cap = self.spec.context_length(self.prediction_length)
        series = [s[-cap:] if cap else s for s in series]
        out = self._run(self.spec.build(self.season_length), series)
        limit = EXPLOSION_FACTOR * np.array([max(float(np.max(np.abs(s))), 1.0) for s in series])
        with np.errstate(invalid="ignore"):
            bad = np.flatnonzero(~(np.abs(out) <= limit[:, None, None]).all(axis=(1, 2)))
        if bad.size:
            out[bad] = self._run(_seasonal_naive(self.season_length), [series[i] for i in bad])
        return out

    def _run(self, model: Any, series: list[np.ndarray]) -> np.ndarray:
        from statsforecast import StatsForecast

        levels, columns = interval_columns(self.quantile_levels)
        frame = pd.DataFrame(
            {
                "unique_id": np.repeat(np.arange(len(series)), [len(s) for s in series]),
                "ds": np.concatenate([np.arange(len(s)) for s in series]),
                "y": np.concatenate(series),
            }
        )
        sf = StatsForecast(
            models=[model], freq=1, n_jobs=self.n_jobs, fallback_model=_seasonal_naive(self.season_length)
        )
        with warnings.catch_warnings(), _quiet("statsforecast"):
            warnings.simplefilter("ignore")
            result = sf.forecast(df=frame, h=self.prediction_length, level=levels)
        result = result.sort_values(["unique_id", "ds"], kind="stable")
        table = result[[*columns, ALIAS]].to_numpy(dtype=np.float32)
        return table.reshape(len(series), self.prediction_length, len(columns) + 1)


class _quiet:
    """Silence a logger inside a ``with`` block (statsforecast logs every fallback)."""

    def __init__(self, name: str) -> None:
        self.logger = logging.getLogger(name)

    def __enter__(self) -> None:
        self.level = self.logger.level
        self.logger.setLevel(logging.CRITICAL)

    def __exit__(self, *exc: object) -> None:
        self.logger.setLevel(self.level)


def make_baseline(name: str, prediction_length: int, season_length: int, **kwargs: Any) -> StatsForecastPredictor:
    """The predictor for baseline ``name``; ``kwargs`` go to :class:`StatsForecastPredictor`."""
    return StatsForecastPredictor(name, prediction_length, season_length, **kwargs)
