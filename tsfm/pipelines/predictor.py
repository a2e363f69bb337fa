"""gluonts ``Predictor`` adapter for tsfm models: test instances in, ``QuantileForecast`` objects out.

gluonts is the vocabulary GIFT-Eval and its users speak (STYLE.md): a ``Predictor`` turns a dataset of entries
(``start`` a ``pd.Period``, ``target`` a 1-D array, ``item_id``) into one ``Forecast`` per entry, in order, and
``gluonts.model.evaluate_model`` scores those. This adapter is the only place where our array API
(:func:`tsfm.forecast.predict`) meets gluonts; it batches entries, asks for the nine GIFT-Eval quantile levels and
wraps each row of the result as a ``QuantileForecast`` keyed ``"0.1"`` ... ``"0.9"`` plus ``"mean"``. Our point
forecast is the median everywhere else (``predict``, ``predict_df``); gluonts' contract names the point forecast
``"mean"``, so :func:`make_quantile_forecast` is the one place where our median is stored under that key (as the
other quantile models on the leaderboard do; without it gluonts falls back to the median anyway, with a warning per
call).

This module imports gluonts (the ``eval`` extra); ``tsfm`` itself never does. The adapter is univariate:
multivariate datasets are evaluated per variate (``to_univariate``), as GIFT-Eval does for every univariate model.
It knows nothing of metrics, datasets or baselines (``tsfm.pipelines.evaluate``, ``tsfm.pipelines.data``,
``tsfm.pipelines.baselines``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

import numpy as np
from gluonts.dataset.util import forecast_start
from gluonts.model.forecast import QuantileForecast
from gluonts.model.predictor import Predictor

from tsfm.config import DEFAULT_QUANTILE_LEVELS

__all__ = ["QUANTILE_LEVELS", "LevelIndexedQuantileForecast", "TsfmPredictor", "forecast_keys",
           "make_quantile_forecast"]

QUANTILE_LEVELS: tuple[float, ...] = DEFAULT_QUANTILE_LEVELS
"""GIFT-Eval's levels for ``mean_weighted_sum_quantile_loss`` (its CRPS): 0.1, 0.2, ..., 0.9."""


def forecast_keys(quantile_levels: Sequence[float]) -> list[str]:
    """``QuantileForecast`` keys for levels: ``str(level)`` (``"0.1"``), which is what gluonts' metrics look up."""
    return [str(float(q)) for q in quantile_levels]


class LevelIndexedQuantileForecast(QuantileForecast):
    """gluonts' ``QuantileForecast``, with the levels it holds looked up in a dict built once.

    gluonts' ``QuantileForecast.quantile`` sorts and parses its keys on every call, and ``evaluate_model`` calls it
    once per metric, level and forecast: about 150,000 times in one pass over the offline benchmark, 7.8 of 21 s on
    two CPU cores for a 1M model (``benchmarks/RESULTS.md``). A level this forecast holds (``0.1``, ``"0.1"``)
    returns the array gluonts would return, the same object; anything else (a level between two, ``"p90"``, a
    ``Quantile``) goes to gluonts' own method, interpolation and tails included.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._by_level = {float(key): values for key, values in self._forecast_dict.items() if key != "mean"}

    def quantile(self, inference_quantile: float | str) -> np.ndarray:
        if isinstance(inference_quantile, float | str):
            try:
                held = self._by_level.get(float(inference_quantile))
            except ValueError:  # "p90": gluonts parses it
                held = None
            if held is not None:
                return held
        return super().quantile(inference_quantile)


def make_quantile_forecast(
    quantiles: np.ndarray,
    quantile_levels: Sequence[float],
    entry: dict[str, Any],
    mean: np.ndarray | None = None,
) -> QuantileForecast:
    """One ``QuantileForecast`` for the test input ``entry``.

    Args:
        quantiles: ``[H, Q]`` values at ``quantile_levels``.
        quantile_levels: the levels of the last axis of ``quantiles``.
        entry: the gluonts input entry; the forecast starts right after its target and keeps its ``item_id``.
        mean: ``[H]`` point forecast stored under ``"mean"`` (default: the 0.5 quantile, or none if absent).
    """
    keys = forecast_keys(quantile_levels)
    arrays = np.asarray(quantiles, dtype=np.float32).T  # [Q, H]
    if mean is None and "0.5" in keys:
        mean = arrays[keys.index("0.5")]
    if mean is not None:
        arrays = np.concatenate([arrays, np.asarray(mean, dtype=np.float32)[None, :]], axis=0)
        keys = [*keys, "mean"]
    return LevelIndexedQuantileForecast(
        forecast_arrays=arrays,
        start_date=forecast_start(entry),
        forecast_keys=keys,
        item_id=entry.get("item_id"),
    )


def _chunks(entries: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    it = iter(entries)
    while chunk := list(islice(it, size)):
        yield chunk


def _context(target: Any, item_id: Any, context_length: int) -> np.ndarray:
    """The last ``context_length`` steps as float32; an all-NaN context becomes one zero.

    ``allow_nan_forecast=False`` (GIFT-Eval's setting) forbids NaN forecasts, and the model rejects contexts with no
    observation, so such a window (datasets "with missing" have them) is forecast as zero: the same dummy value
    gluonts' ``LastValueImputation`` gives the statistical baselines.
    """
    values = np.asarray(target, dtype=np.float32)
    if values.ndim != 1:
        raise ValueError(
            f"series {item_id!r} has target shape {values.shape}: the adapter is univariate; evaluate multivariate "
            "data per variate (GiftEvalDataset.per_variate / to_univariate)"
        )
    values = values[-context_length:]
    if values.size == 0 or np.isnan(values).all():
        return np.zeros(1, dtype=np.float32)
    return values


_WARNED: set[str] = set()


def _warn_once(message: Warning | str, category: type[Warning]) -> None:
    """Re-emit a warning of ``tsfm.forecast.predict`` once per process: an evaluation calls it per configuration and
    chunk, and the long-horizon notice would otherwise repeat for every long-term configuration."""
    text = str(message)
    if text not in _WARNED:
        _WARNED.add(text)
        warnings.warn(text, category, stacklevel=3)


class TsfmPredictor(Predictor):
    """A gluonts ``Predictor`` over a loaded tsfm model (``Forecaster`` or anything ``tsfm.forecast.predict`` takes).

    Args:
        model: a loaded model, or a name or checkpoint path (loaded once, here).
        prediction_length: steps to forecast per entry.
        quantile_levels: levels returned as forecast keys (default: GIFT-Eval's nine).
        batch_size: series per forward pass.
        chunk_size: entries read from the dataset before forecasting them together; larger chunks fill batches of
            equal length better, smaller ones hold less in memory.
        context_length: last steps of each entry to use (default: the model's).
        show_progress: tqdm bar over forward passes (``None``: tsfm's default rule).

    Example:
        >>> predictor = TsfmPredictor(tsfm.load_model("default"), prediction_length=48)  # doctest: +SKIP
        >>> forecasts = list(predictor.predict(dataset.test_data.input))  # doctest: +SKIP
        >>> forecasts[0].quantile("0.9").shape  # doctest: +SKIP
        (48,)
    """

    def __init__(
        self,
        model: Any,
        prediction_length: int,
        *,
        quantile_levels: Sequence[float] = QUANTILE_LEVELS,
        batch_size: int = 256,
        chunk_size: int = 2048,
        context_length: int | None = None,
        show_progress: bool | None = False,
    ) -> None:
        from tsfm.forecast import resolve_model

        super().__init__(prediction_length=prediction_length)
        self.model = resolve_model(model)  # a name or path is loaded here, once
        self.quantile_levels = tuple(float(q) for q in quantile_levels)
        self.batch_size = batch_size
        self.chunk_size = max(chunk_size, batch_size)
        self.context_length = context_length  # passed to predict (None: the loaded model's own)
        self.show_progress = show_progress

    def predict(self, dataset: Iterable[dict[str, Any]], **kwargs: Any) -> Iterator[QuantileForecast]:
        """Yield one ``QuantileForecast`` per entry of ``dataset``, in order."""
        from tsfm.forecast import predict

        for chunk in _chunks(dataset, self.chunk_size):
            window = self.context_length or getattr(getattr(self.model, "config", None), "context_length", 2**31)
            contexts = [_context(e["target"], e.get("item_id"), window) for e in chunk]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                quantiles, median = predict(
                    contexts,
                    self.prediction_length,
                    model=self.model,
                    quantile_levels=self.quantile_levels,
                    batch_size=self.batch_size,
                    context_length=self.context_length,
                    show_progress=self.show_progress,
                )
            for w in caught:
                _warn_once(w.message, w.category)
            for entry, q, m in zip(chunk, quantiles, median, strict=True):
                yield make_quantile_forecast(q, self.quantile_levels, entry, mean=m)
