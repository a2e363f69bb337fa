"""Leaning a forecast towards Seasonal Naive where the series' own recent past says Seasonal Naive forecasts it better.

Some series repeat their last season almost exactly (a 5-minute temperature sensor's daily cycle, an hourly load):
Seasonal Naive copies it, while a pretrained model redraws it with small phase and peak errors and loses on MASE
(``benchmarks/RESULTS.md``, ``yosemite_temps/5T``). Which of the two suits a series can be read from the series
itself, as statistical forecasting chooses between models by their in-sample accuracy: hold out the context's last
steps, forecast them from the steps before with both, and compare their mean absolute errors. The model's quantiles
are then moved (each by the same amount, so they stay sorted and keep their spread) towards the Seasonal-Naive
forecast of the real future by a weight that grows with the model's backtest error against Seasonal Naive's:

- ``"inverse_mae"``: the weight of a combination whose members count inversely to their errors,
  ``mae_model / (mae_model + mae_naive)`` (a half where the two did equally well).
- ``"inverse_mse"``: the same with mean squared errors, Bates and Granger's weights (members count inversely to
  their error variances), ``mse_model / (mse_model + mse_naive)``: further towards the better of the two than
  ``"inverse_mae"`` (errors 1 and 2 give 1/5 instead of 1/3), which the benchmark's windows before its test windows
  preferred (``benchmarks/RESULTS.md``).
- ``"switch"``: all the way (the Seasonal-Naive median with the model's spread) where Seasonal Naive's error was
  smaller, not at all elsewhere.

The period is the one :func:`tsfm.seasonality.detect_period` reads from the context (0: no season, no blend). A
series whose context cannot hold the backtest's horizon after two whole periods is left as the model forecast it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tsfm.config import naive_blend_problem
from tsfm.seasonality import detect_period, seasonal_naive_hint

#: The backtest's own context must hold this many whole periods before its held-out steps.
MIN_PERIODS = 2


def backtest_horizon(context_length: int, prediction_length: int) -> int:
    """Steps held out at the context's end: the forecast's own horizon, at most half the context."""
    return min(prediction_length, context_length // 2)


def backtestable(history: torch.Tensor, period: torch.Tensor) -> torch.Tensor:
    """``[B]`` bool: a season, and :data:`MIN_PERIODS` whole periods of ``history [B, T']`` from its first observed
    step on (the history before the held-out steps)."""
    steps = (~torch.isnan(history)).cumsum(1).gt(0).sum(1)
    return (period > 0) & (steps >= MIN_PERIODS * period)


def naive_weight(context: torch.Tensor, period: torch.Tensor, backtest_median: torch.Tensor, how: str) -> torch.Tensor:
    """``[B]`` weight of Seasonal Naive for ``context [B, T]`` given the model's median forecast ``[B, h]`` of the
    context's last ``h`` steps from the steps before them; 0 where the backtest cannot be run."""
    horizon = backtest_median.shape[1]
    history, truth = context[:, :-horizon], context[:, -horizon:]
    naive = seasonal_naive_hint(history, period, horizon)
    observed = ~torch.isnan(truth) & ~torch.isnan(naive)
    count = observed.sum(1)
    power = 2 if how == "inverse_mse" else 1
    model_error = torch.where(observed, (backtest_median - truth).abs() ** power, 0.0).sum(1) / count.clamp(min=1)
    naive_error = torch.where(observed, (naive - truth).abs() ** power, 0.0).sum(1) / count.clamp(min=1)
    usable = backtestable(history, period) & (count > 0)
    if how in ("inverse_mae", "inverse_mse"):
        total = model_error + naive_error
        weight = torch.where(total > 0, model_error / total.clamp(min=torch.finfo(total.dtype).tiny), 0.0)
    elif how == "switch":
        weight = (naive_error < model_error).to(context.dtype)
    else:
        raise ValueError(naive_blend_problem(how) or f"naive_blend {how!r} has no weight: it does not blend")
    return torch.where(usable, weight, 0.0)


def blend_with_seasonal_naive(context: torch.Tensor, quantiles: torch.Tensor, median_index: int, how: str,
                              backtest: Callable[[torch.Tensor, int], torch.Tensor]) -> torch.Tensor:
    """``quantiles [B, Q, H]`` of ``context [B, T]`` moved towards Seasonal Naive by :func:`naive_weight`.

    ``backtest(history, horizon)`` is the model's median forecast ``[B, horizon]`` of ``history [B, T - horizon]``
    (the same model and decoding, without the blend).
    """
    if how == "off":
        return quantiles
    horizon = backtest_horizon(context.shape[1], quantiles.shape[2])
    if horizon < 1:
        return quantiles
    period = detect_period(context)
    history = context[:, :-horizon]
    rows = torch.nonzero(backtestable(history, period)).flatten()
    if rows.numel() == 0:
        return quantiles  # no series can be backtested: spare the second forecast
    weight = torch.zeros(context.shape[0], dtype=quantiles.dtype, device=quantiles.device)
    weight[rows] = naive_weight(context[rows], period[rows], backtest(history[rows], horizon), how)
    naive = seasonal_naive_hint(context, period, quantiles.shape[2])
    shift = torch.nan_to_num(naive - quantiles[:, median_index], nan=0.0) * weight[:, None]
    return quantiles + shift[:, None, :]
