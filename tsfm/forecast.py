"""The user-facing forecasting API: ``predict`` for arrays and ``predict_df`` for long-format DataFrames.

This module turns user data into the model's input (``[B, T]`` float32, NaN = missing, left-padded) and the
model's output (``[B, Q, H]`` quantiles at the model's levels) into what the user asked for: any quantile levels,
timestamps, ids. It owns batching, context truncation and the long-horizon warning. It does not know how the model
works inside (scaling, patching and extrapolation past the trained horizon live in ``tsfm.model``), and DataFrame
validation lives in ``tsfm.df_utils``.

Example::

    >>> from tsfm.forecast import predict_df
    >>> forecast = predict_df(df, prediction_length=24)   # columns item_id, timestamp, median, 0.1 ... 0.9
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Union

import numpy as np

from tsfm.config import DEFAULT_QUANTILE_LEVELS, ModelConfig, naive_blend_problem
from tsfm.df_utils import (
    ForecastInputError,
    ForecastInputTypeError,
    check_optional_bool,
    check_positive_int,
    check_prediction_length,
    check_quantile_levels,
    prepare_df,
)

if TYPE_CHECKING:
    import pandas as pd
    import torch

__all__ = [
    "DEFAULT_QUANTILE_LEVELS",
    "POINT_FORECAST",
    "ForecastInputError",
    "SupportsForecast",
    "interpolate_quantiles",
    "predict",
    "predict_df",
    "resolve_model",
]

POINT_FORECAST = "median"
"""The one word for the point forecast (the 0.5 quantile): ``predict`` returns ``(quantiles, median)`` and
``predict_df`` names its column so. External contracts keep their own names, translated at one boundary each: gluonts'
``"mean"`` key in :func:`tsfm.pipelines.predictor.make_quantile_forecast`."""


class SupportsForecast(Protocol):
    """What ``predict`` needs from a model: ``tsfm.model.Forecaster`` or anything shaped like it (tests use fakes)."""

    config: ModelConfig

    @property
    def quantile_levels(self) -> tuple[float, ...]: ...

    def forecast(self, context: torch.Tensor, prediction_length: int) -> torch.Tensor: ...


ModelLike = Union[str, "os.PathLike[str]", SupportsForecast]


# ----------------------------------------------------------------------------------------------------------------
# Public API


def resolve_model(model: ModelLike = "default", device: str | torch.device | None = None) -> SupportsForecast:
    """Return a ready model: load it by name or path, or check that a given model object is on ``device``.

    Args:
        model: ``"default"`` (the model shipped in the package), a checkpoint folder, or a loaded ``Forecaster``.
        device: where to run. Models loaded by name go there (CPU when ``None``). A model object is never moved
            behind the caller's back: if it sits elsewhere this raises, and ``None`` means "wherever it is".
    """
    wanted = None if device is None else _as_device(device)
    if isinstance(model, (str, os.PathLike)):
        from tsfm.checkpoint import load_model

        return load_model(model, device="cpu" if wanted is None else wanted)
    if not callable(getattr(model, "forecast", None)) or getattr(model, "config", None) is None:
        raise ForecastInputTypeError(
            f"model must be a model name, a checkpoint path or a Forecaster, got {type(model).__name__}"
        )
    if wanted is not None and not _same_device(_model_device(model), wanted):
        raise ForecastInputError(
            f"the model is on {_model_device(model)} but device={str(device)!r}; "
            "move it with model.to(...) or leave device=None"
        )
    return model


def predict(
    context: Any,
    prediction_length: int,
    *,
    model: ModelLike = "default",
    quantile_levels: Sequence[float] = DEFAULT_QUANTILE_LEVELS,
    batch_size: int = 256,
    context_length: int | None = None,
    device: str | torch.device | None = None,
    show_progress: bool | None = None,
    infer_nonnegative: bool | None = None,
    naive_blend: str | None = None,
    flip_equivariant: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Forecast quantiles for one or many series given as arrays.

    Args:
        context: one series (1-D array, tensor or list of numbers), several series of any lengths (a list of 1-D
            arrays/tensors), or ``[N, T]`` (2-D array or tensor; left-pad shorter rows with NaN). NaN = missing.
        prediction_length: ``H``, steps to forecast. Horizons past the model's trained horizon are extrapolated
            (more masked future tokens than in training; see ``ModelConfig.decoding``) and a ``UserWarning`` says so.
        model: ``"default"``, a checkpoint folder, or a loaded ``Forecaster`` (reuse one to avoid reloading).
        quantile_levels: levels to return, in this order. Levels the model does not predict are interpolated
            linearly between its neighbouring levels; levels outside the model's range (``0.1``-``0.9`` for the
            shipped model) are clamped to the outermost level with a warning, as chronos-bolt does.
        batch_size: series per forward pass.
        context_length: keep at most this many last steps of each series (default: ``model.config.context_length``).
        device: see ``resolve_model``.
        show_progress: tqdm progress bar over batches; ``None`` shows it only for several batches on a terminal.
        infer_nonnegative: ``False`` keeps the negative forecasts of series whose context has no negative value,
            ``True`` sets them to 0, ``None`` does what the model's ``config.infer_nonnegative`` says (on for the
            shipped models).
        naive_blend: ``"off"`` returns the model's own forecast; ``"inverse_mae"``, ``"inverse_mse"`` or ``"switch"``
            move it towards Seasonal Naive by how the two forecast each series' last steps (``tsfm.naive_blend``: one
            more, shorter forecast per series); ``None`` does what the model's ``config.naive_blend`` says
            (``"inverse_mse"`` for the shipped default).
        flip_equivariant: ``True`` forecasts each series as it is and upside down and averages the two (the second
            turned back), so that ``-x`` is forecast as exactly minus ``x``'s forecast, at twice the compute;
            ``False`` forecasts it once; ``None`` does what the model's ``config.flip_equivariant`` says (on for the
            shipped default: ``ModelConfig.flip_equivariant``).

    Returns:
        ``(quantiles, median)``: float32 arrays ``[N, H, len(quantile_levels)]`` and ``[N, H]``; the median is the
        point forecast (the model's 0.5 level).

    Series are batched by their length rounded up to whole patches, so each series is padded exactly as if it were
    forecast alone: a forecast does not depend on which other series share its batch.
    """
    series = _as_series_list(context)
    if not series:
        raise ForecastInputError("context is empty: give at least one series")
    labels = [f"context[{i}]" for i in range(len(series))] if len(series) > 1 else ["context"]
    return _predict_series(
        series,
        labels,
        prediction_length,
        model=model,
        quantile_levels=quantile_levels,
        batch_size=batch_size,
        context_length=context_length,
        device=device,
        show_progress=show_progress,
        infer_nonnegative=infer_nonnegative,
        naive_blend=naive_blend,
        flip_equivariant=flip_equivariant,
    )


def predict_df(
    df: pd.DataFrame,
    prediction_length: int,
    *,
    model: ModelLike = "default",
    id_column: Hashable = "item_id",
    timestamp_column: Hashable = "timestamp",
    target: Hashable = "target",
    quantile_levels: Sequence[float] = DEFAULT_QUANTILE_LEVELS,
    freq: str | None = None,
    batch_size: int = 256,
    context_length: int | None = None,
    device: str | torch.device | None = None,
    validate_inputs: bool = True,
    show_progress: bool | None = None,
    infer_nonnegative: bool | None = None,
    naive_blend: str | None = None,
    flip_equivariant: bool | None = None,
) -> pd.DataFrame:
    """Forecast every series of a long-format DataFrame.

    Args:
        df: one row per (series, timestamp) with an id, a timestamp and a numeric target column; other columns are
            ignored. Rows need not be sorted: each series is sorted by time. NaN targets are missing values.
        prediction_length: steps to forecast per series (see ``predict`` for horizons past the trained one).
        model: ``"default"``, a checkpoint folder, or a loaded ``Forecaster``.
        id_column, timestamp_column, target: column names; for the Nixtla dialect pass ``"unique_id"``, ``"ds"``,
            ``"y"``.
        quantile_levels: output quantile levels; see ``predict`` for interpolation and clamping.
        freq: pandas frequency alias (``"h"``, ``"D"``, ``"W-SUN"``, ``"MS"``, ``"15min"``). ``None`` infers it
            per series and requires all series to agree and be regular. When given, every timestamp must lie on its
            grid, and timestamps missing inside a series are filled with NaN (regularised) before forecasting.
        batch_size, context_length, device, show_progress, infer_nonnegative, naive_blend, flip_equivariant: as in
            ``predict``.
        validate_inputs: ``False`` skips the per-series checks for speed; rows must then be sorted by time within
            each series and regular (see ``tsfm.df_utils.prepare_df``).

    Returns:
        Long-format frame with columns ``[id_column, timestamp_column, "median", "0.1", ..., "0.9"]``:
        ``median`` is the point forecast (the model's 0.5 level, as ``predict`` returns it), one column per
        requested level named ``str(level)``; ``prediction_length``
        rows per series, series in the order their ids first appear in ``df``, then by time. Future timestamps
        continue each series from its last timestamp at the common frequency.

    Raises:
        ForecastInputError: a ``ValueError`` (``TypeError`` too, for wrong types) naming the column or series at
            fault: missing columns, non-numeric or infinite or all-NaN targets, bad or duplicate timestamps,
            irregular or disagreeing frequencies, bad arguments.
    """
    import pandas as pd

    prediction_length = check_prediction_length(prediction_length)
    levels = check_quantile_levels(quantile_levels)
    prepared = prepare_df(
        df,
        id_column=id_column,
        timestamp_column=timestamp_column,
        target=target,
        freq=freq,
        validate_inputs=validate_inputs,
    )
    quantiles, median = _predict_series(
        prepared.targets,
        [f"series {item_id!r}" for item_id in prepared.item_ids],
        prediction_length,
        model=model,
        quantile_levels=levels,
        batch_size=batch_size,
        context_length=context_length,
        device=device,
        show_progress=show_progress,
        infer_nonnegative=infer_nonnegative,
        naive_blend=naive_blend,
        flip_equivariant=flip_equivariant,
    )
    columns: dict[Hashable, Any] = {
        id_column: prepared.item_ids.repeat(prediction_length),
        timestamp_column: prepared.future_timestamps(prediction_length),
        POINT_FORECAST: median.reshape(-1),
    }
    for j, level in enumerate(levels):
        columns[str(level)] = quantiles[:, :, j].reshape(-1)
    return pd.DataFrame(columns)


def interpolate_quantiles(
    values: np.ndarray, model_levels: Sequence[float], quantile_levels: Sequence[float]
) -> np.ndarray:
    """Quantiles at ``quantile_levels`` from quantiles at sorted ``model_levels`` (last axis), linearly.

    Levels outside ``[model_levels[0], model_levels[-1]]`` take the outermost values (clamping): the model has no
    information about tails it was not trained on, and inventing them by extrapolation would look more certain
    than it is. Levels the model predicts are returned exactly. Sorted model quantiles give sorted outputs for
    sorted requested levels.
    """
    known = np.asarray(model_levels, dtype=np.float64)
    wanted = np.clip(np.asarray(quantile_levels, dtype=np.float64), known[0], known[-1])
    if len(known) == 1:
        return np.repeat(values[..., :1], len(wanted), axis=-1)
    lower = np.clip(np.searchsorted(known, wanted, side="right") - 1, 0, len(known) - 2)
    weight = (wanted - known[lower]) / (known[lower + 1] - known[lower])
    low, high = values[..., lower], values[..., lower + 1]
    out = low + weight * (high - low)
    exact = weight == 1.0  # keep the top level bit-exact instead of low + (high - low)
    out[..., exact] = high[..., exact]
    return out.astype(values.dtype, copy=False)


# ----------------------------------------------------------------------------------------------------------------
# The pipeline: arguments -> model -> batches -> quantiles


def _predict_series(
    series: list[np.ndarray],
    labels: list[str],
    prediction_length: int,
    *,
    model: ModelLike,
    quantile_levels: Sequence[float],
    batch_size: int,
    context_length: int | None,
    device: str | torch.device | None,
    show_progress: bool | None,
    infer_nonnegative: bool | None = None,
    naive_blend: str | None = None,
    flip_equivariant: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Shared body of ``predict`` and ``predict_df``; ``labels`` name the series in error messages."""
    prediction_length = check_prediction_length(prediction_length)
    infer_nonnegative = check_optional_bool("infer_nonnegative", infer_nonnegative)
    flip_equivariant = check_optional_bool("flip_equivariant", flip_equivariant)
    if problem := naive_blend_problem(naive_blend, allow_none=True):
        raise ForecastInputError(problem)
    levels = check_quantile_levels(quantile_levels)
    batch_size = check_positive_int("batch_size", batch_size)
    context_length = check_positive_int("context_length", context_length, allow_none=True)
    forecaster = resolve_model(model, device)
    config = forecaster.config
    context_length = context_length or config.context_length
    series = [
        _check_context(values[-context_length:], label, context_length)
        for values, label in zip(series, labels, strict=True)
    ]
    _warn_if_past_trained_horizon(config, prediction_length)

    raw = _forecast_in_batches(forecaster, series, prediction_length, batch_size, show_progress,
                               infer_nonnegative, naive_blend, flip_equivariant)  # [N, Qm, H]
    raw = np.moveaxis(raw, 1, 2)  # [N, H, Qm]
    model_levels = tuple(float(q) for q in forecaster.quantile_levels)
    _warn_if_clamped(levels, model_levels)
    quantiles = interpolate_quantiles(raw, model_levels, levels)
    median = interpolate_quantiles(raw, model_levels, (0.5,))[..., 0]
    return quantiles, median


def _as_series_list(context: Any) -> list[np.ndarray]:
    """Normalise the accepted context forms to a list of 1-D float arrays."""
    import pandas as pd
    import torch

    if isinstance(context, pd.DataFrame):
        raise ForecastInputTypeError("context is a DataFrame: use predict_df for long-format frames")
    if isinstance(context, torch.Tensor):
        context = context.detach().to("cpu", torch.float64).numpy()
    elif isinstance(context, pd.Series):
        context = context.to_numpy(dtype=np.float64, na_value=np.nan)
    if isinstance(context, np.ndarray) and context.dtype != object:
        if context.ndim == 1:
            return [_as_1d(context, "context")]
        if context.ndim == 2:
            return [_as_1d(row, f"context[{i}]") for i, row in enumerate(context)]
        raise ForecastInputError(f"context must be 1-D [T] or 2-D [N, T], got shape {context.shape}")
    if isinstance(context, (list, tuple, np.ndarray)):
        if len(context) == 0:
            raise ForecastInputError("context is empty: give at least one series")
        if all(isinstance(x, (int, float, np.number)) and not isinstance(x, bool) for x in context):
            return [_as_1d(context, "context")]  # a plain list of numbers is one series
        return [_as_1d(item, f"context[{i}]") for i, item in enumerate(context)]
    raise ForecastInputTypeError(
        f"context must be an array, a tensor or a list of 1-D arrays, got {type(context).__name__}"
    )


def _as_1d(values: Any, label: str) -> np.ndarray:
    import torch

    if isinstance(values, torch.Tensor):
        values = values.detach().to("cpu", torch.float64).numpy()
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ForecastInputTypeError(f"{label} must hold numbers, got {type(values).__name__}") from None
    if array.ndim != 1:
        raise ForecastInputError(f"{label} must be 1-D, got shape {array.shape}")
    return array


def _check_context(values: np.ndarray, label: str, context_length: int) -> np.ndarray:
    if len(values) == 0:
        raise ForecastInputError(f"{label} is empty")
    if np.isinf(values).any():
        raise ForecastInputError(f"{label} has infinite values; use NaN for missing values")
    if np.isnan(values).all():
        raise ForecastInputError(
            f"{label} has no observed values in its last {min(len(values), context_length)} steps (all NaN)"
        )
    return values


def _warn_if_past_trained_horizon(config: ModelConfig, prediction_length: int) -> None:
    trained = config.train_horizon_patches * config.patch_size
    if prediction_length > trained:
        warnings.warn(
            f"prediction_length={prediction_length} exceeds the horizon the model was trained on ({trained} steps); "
            "the steps beyond it come from more masked future tokens than training used (autoregressive decoding "
            "feeds its median back, but its quantile spread still comes from those tokens) and are less reliable",
            UserWarning,
            stacklevel=4,
        )


def _warn_if_clamped(levels: Sequence[float], model_levels: Sequence[float]) -> None:
    outside = [q for q in levels if q < model_levels[0] or q > model_levels[-1]]
    if outside:
        warnings.warn(
            f"quantile levels {outside} lie outside the levels the model predicts "
            f"({model_levels[0]}-{model_levels[-1]}); they are set to the outermost predicted quantiles, "
            "which understates the tails",
            UserWarning,
            stacklevel=4,
        )


def _forecast_in_batches(
    model: SupportsForecast,
    series: list[np.ndarray],
    prediction_length: int,
    batch_size: int,
    show_progress: bool | None,
    infer_nonnegative: bool | None = None,
    naive_blend: str | None = None,
    flip_equivariant: bool | None = None,
) -> np.ndarray:
    """Run the model over length buckets and batches; returns ``[N, Q_model, H]`` float32 in input order.
    ``infer_nonnegative``, ``naive_blend`` and ``flip_equivariant`` reach ``model.forecast`` only when set, so models
    without those options still serve."""
    import torch
    from tqdm.auto import tqdm

    patch_size = model.config.patch_size
    options = {name: value for name, value in (("infer_nonnegative", infer_nonnegative), ("naive_blend", naive_blend),
                                               ("flip_equivariant", flip_equivariant)) if value is not None}
    batches = _plan_batches([len(s) for s in series], patch_size, batch_size)
    device = _model_device(model)
    out = np.empty((len(series), len(model.quantile_levels), prediction_length), dtype=np.float32)
    # auto: no bar for a single batch; otherwise tqdm's own rule (None) hides it when stderr is not a terminal
    disable: bool | None = (True if len(batches) <= 1 else None) if show_progress is None else not show_progress
    was_training = isinstance(model, torch.nn.Module) and model.training
    if isinstance(model, torch.nn.Module):
        model.eval()  # dropout off for inference; the caller's mode is restored below
    try:
        with torch.inference_mode():
            for index in tqdm(batches, desc="forecasting", unit="batch", disable=disable):
                width = math.ceil(max(len(series[i]) for i in index) / patch_size) * patch_size
                context = torch.from_numpy(_left_pad([series[i] for i in index], width)).to(device)
                result = model.forecast(context, prediction_length, **options)
                out[index] = _check_output(result, len(index), out.shape[1], prediction_length)
    finally:
        if was_training:
            model.train()
    return out


def _plan_batches(lengths: Sequence[int], patch_size: int, batch_size: int) -> list[np.ndarray]:
    """Index batches grouped by length in whole patches, so padding never depends on the other series."""
    tokens = np.ceil(np.asarray(lengths) / patch_size).astype(np.int64)
    batches = []
    for bucket in np.unique(tokens):
        members = np.flatnonzero(tokens == bucket)
        batches.extend(members[i : i + batch_size] for i in range(0, len(members), batch_size))
    return batches


def _left_pad(series: list[np.ndarray], width: int) -> np.ndarray:
    """Stack series into ``[B, width]`` float32, right-aligned, NaN in front (NaN = missing to the model)."""
    batch = np.full((len(series), width), np.nan, dtype=np.float32)
    for row, values in zip(batch, series, strict=True):
        row[width - len(values) :] = values
    return batch


def _check_output(result: torch.Tensor, batch: int, n_levels: int, prediction_length: int) -> np.ndarray:
    expected = (batch, n_levels, prediction_length)
    if tuple(result.shape) != expected:
        raise RuntimeError(f"model.forecast returned shape {tuple(result.shape)}, expected [B, Q, H] = {expected}")
    return result.detach().to("cpu").float().numpy()


def _as_device(device: str | torch.device) -> torch.device:
    import torch

    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ForecastInputError(f"device={device!r} is not a torch device ({err}); use e.g. 'cpu' or 'cuda'") from None


def _model_device(model: Any) -> torch.device:
    import torch

    parameters = getattr(model, "parameters", None)
    if callable(parameters):
        first = next(iter(parameters()), None)
        if first is not None:
            return first.device
    return torch.device("cpu")


def _same_device(a: torch.device, b: torch.device) -> bool:
    """``cuda`` and ``cuda:0`` name the same device when the current device is 0."""
    if a.type != b.type:
        return False
    if a.type != "cuda":
        return True
    import torch

    current = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return (a.index if a.index is not None else current) == (b.index if b.index is not None else current)
