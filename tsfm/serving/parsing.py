"""The CPU work of a forecast request besides the model: JSON body -> validated arrays, forecast -> JSON answer.

Both steps hold Python's GIL while they run (pydantic-core parses and validates, orjson writes, pandas steps
calendars), so on the event loop's thread they would stall every other request, and even on another thread of the
server process a large body would hold the event loop for as long as its parse takes. The app therefore runs them
on a worker thread for small bodies and in a helper process for large ones (``tsfm.serving.app``). Everything here
is a plain function of picklable arguments for that reason: ``RequestSpec`` rebuilds the app's request class in the
helper process, errors travel as ``InvalidRequest`` with short, plain error dicts.

This module knows nothing of HTTP status codes or the event loop; it imports neither torch nor FastAPI.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from pydantic import ValidationError

from tsfm.serving.schemas import (
    ForecastRequestBase,
    ForecastSchemas,
    StreamSchemas,
    build_schemas,
    build_stream_schemas,
)
from tsfm.serving.timestamps import TimeAxis, TimestampsTooCostly, build_timestamps, check_calendar_cost

MAX_ERRORS = 20  # validation errors listed in one 422 (a 16 MB body can hold a million bad values)
MAX_ECHO_CHARS = 120  # characters of a bad input echoed back in a 422


class InvalidRequest(ValueError):
    """The request is invalid: ``errors`` are FastAPI-shaped dicts (``loc``, ``msg``, ``type``, short ``input``)."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors)
        self.errors = errors


@dataclass(frozen=True)
class RequestSpec:
    """What defines one app's request class: its model names and limits (picklable, hashable)."""

    model_names: tuple[str, ...]
    context_length: int
    max_series_per_request: int
    max_points_per_series: int
    max_prediction_length: int
    max_quantile_levels: int
    max_forecast_values: int
    max_item_id_length: int
    max_calendar_timestamps: int

    def request_class(self) -> type[ForecastRequestBase]:
        return _request_class(self)

    def stream_schemas(self) -> StreamSchemas:
        """The /v1/streams request classes with the same limits (the answer's size is checked per stream)."""
        return _stream_schemas(self)


@functools.lru_cache(maxsize=8)
def _schemas(spec: RequestSpec) -> ForecastSchemas:
    fields = {k: v for k, v in vars(spec).items() if k != "max_calendar_timestamps"}
    fields["model_names"] = list(spec.model_names)
    return build_schemas(**fields)


def _request_class(spec: RequestSpec) -> type[ForecastRequestBase]:
    return _schemas(spec).request


@dataclass
class Prepared:
    """A validated request: the arrays for the model and what the answer needs besides the forecast."""

    arrays: list[np.ndarray]
    item_ids: list[str | int]
    axes: list[TimeAxis]
    prediction_length: int
    levels: tuple[float, ...]
    model: str | None
    infer_nonnegative: bool | None = None
    naive_blend: str | None = None
    flip_equivariant: bool | None = None


def prepare(spec: RequestSpec, body: bytes) -> Prepared:
    """JSON -> validated request -> float64 arrays (None -> NaN).

    Raises:
        InvalidRequest: the body is empty, not JSON, not valid, or its timestamps would cost more than the limit.
    """
    if not body.strip():
        raise InvalidRequest([{"type": "missing", "loc": ["body"], "msg": "Field required: the request has no body",
                               "input": None}])
    try:
        request: Any = spec.request_class().model_validate_json(body)
    except ValidationError as err:
        raise InvalidRequest(short_errors(err.errors(include_url=False), prefix=("body",))) from None
    del body
    params = request.parameters
    horizon: int = params.prediction_length
    axes = [TimeAxis(series.start, series.freq, len(series.target)) for series in request.inputs]
    try:
        check_calendar_cost(axes, horizon, spec.max_calendar_timestamps)
    except TimestampsTooCostly as err:
        raise InvalidRequest([{"type": "value_error", "loc": ["body", "inputs"], "input": None,
                               "msg": str(err)}]) from None
    return Prepared(
        arrays=[np.asarray(series.target, dtype=np.float64) for series in request.inputs],
        item_ids=[i if series.item_id is None else series.item_id for i, series in enumerate(request.inputs)],
        axes=axes,
        prediction_length=horizon,
        levels=tuple(params.quantile_levels),
        model=params.model,
        infer_nonnegative=params.infer_nonnegative,
        naive_blend=params.naive_blend,
        flip_equivariant=params.flip_equivariant,
    )


def render(
    spec: RequestSpec,
    item_ids: Sequence[str | int],
    axes: Sequence[TimeAxis],
    levels: Sequence[float],
    model: str,
    warnings: Sequence[str],
    quantiles: np.ndarray,
    median: np.ndarray,
) -> bytes:
    """The answer as JSON bytes: timestamps built here (bounded by ``prepare``'s cost check), float32 values in
    their shortest form (orjson: ten times faster than ``json.dumps`` and half the bytes; parsing a value and
    rounding it to float32 gives back exactly what the model produced).

    Raises:
        InvalidRequest: the model's forecast of a series is not finite (its values are too extreme to scale).
    """
    _check_finite(quantiles, median)
    horizon = median.shape[1]
    stamps = build_timestamps(axes, horizon, max_calendar_timestamps=spec.max_calendar_timestamps)
    median = np.ascontiguousarray(median)  # [N, H]
    by_level = np.ascontiguousarray(np.moveaxis(quantiles, 2, 1))  # [N, Q, H]: one row per answer array
    keys = [str(level) for level in levels]
    predictions = []
    for i, item_id in enumerate(item_ids):
        entry: dict[str, Any] = {"item_id": item_id}
        if stamps.per_series[i] is not None:
            entry["timestamps"] = stamps.per_series[i]
        entry["median"] = median[i]
        for j, key in enumerate(keys):
            entry[key] = by_level[i, j]
        predictions.append(entry)
    content = {"model": model, "predictions": predictions, "warnings": [*warnings, *stamps.warnings]}
    return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


# ----------------------------------------------------------------------------------------------------------------
# Streams: the bodies of /v1/streams routes (the checks that need the stream itself are in tsfm.serving.streams)


@functools.lru_cache(maxsize=8)
def _stream_schemas(spec: RequestSpec) -> StreamSchemas:
    return build_stream_schemas(
        _schemas(spec), model_names=spec.model_names, max_series_per_request=spec.max_series_per_request,
        max_points_per_series=spec.max_points_per_series, max_prediction_length=spec.max_prediction_length,
        max_quantile_levels=spec.max_quantile_levels,
    )


@dataclass
class PreparedOpen:
    arrays: list[np.ndarray]
    item_ids: list[str | int]
    axes: list[TimeAxis]
    model: str | None
    max_drift: float | None


@dataclass
class PreparedUpdate:
    values: list[np.ndarray]
    timestamps: list[list[Any] | None] | None  # datetimes per series, checked against the stream by the store


@dataclass
class PreparedStreamForecast:
    prediction_length: int
    levels: tuple[float, ...]
    infer_nonnegative: bool | None = None
    naive_blend: str | None = None


def _validate(request_class: Any, body: bytes) -> Any:
    if not body.strip():
        raise InvalidRequest([{"type": "missing", "loc": ["body"], "msg": "Field required: the request has no body",
                               "input": None}])
    try:
        return request_class.model_validate_json(body)
    except ValidationError as err:
        raise InvalidRequest(short_errors(err.errors(include_url=False), prefix=("body",))) from None


def prepare_stream_open(spec: RequestSpec, body: bytes) -> PreparedOpen:
    """``POST /v1/streams``: the series as float64 arrays (None -> NaN), their ids and time axes."""
    request = _validate(spec.stream_schemas().open, body)
    return PreparedOpen(
        arrays=[np.asarray(series.target, dtype=np.float64) for series in request.inputs],
        item_ids=[i if series.item_id is None else series.item_id for i, series in enumerate(request.inputs)],
        axes=[TimeAxis(series.start, series.freq, len(series.target)) for series in request.inputs],
        model=request.model,
        max_drift=request.max_drift,
    )


def prepare_stream_update(spec: RequestSpec, body: bytes) -> PreparedUpdate:
    """``POST /v1/streams/{id}/observations``: new values as float64 arrays; timestamps as given (same lengths)."""
    request = _validate(spec.stream_schemas().update, body)
    values = [np.asarray(row, dtype=np.float64) for row in request.values]
    stamps = request.timestamps
    if stamps is not None:
        errors = []
        if len(stamps) != len(values):
            errors.append({"type": "value_error", "loc": ["body", "timestamps"], "input": None,
                           "msg": f"timestamps has {len(stamps)} series, values has {len(values)}; give one list "
                                  "(or null) per series"})
        else:
            for i, (row, times) in enumerate(zip(values, stamps, strict=True)):
                if times is not None and len(times) != len(row):
                    errors.append({"type": "value_error", "loc": ["body", "timestamps", i], "input": None,
                                   "msg": f"timestamps[{i}] has {len(times)} timestamps for {len(row)} values"})
        if errors:
            raise InvalidRequest(errors[:MAX_ERRORS])
    return PreparedUpdate(values=values, timestamps=None if stamps is None else list(stamps))


def prepare_stream_forecast(spec: RequestSpec, body: bytes) -> PreparedStreamForecast:
    """``POST /v1/streams/{id}/forecast``: the horizon and levels (the answer's size is checked with the stream)."""
    request = _validate(spec.stream_schemas().forecast, body)
    return PreparedStreamForecast(request.prediction_length, tuple(request.quantile_levels), request.infer_nonnegative,
                                  request.naive_blend)


def warm_up() -> None:
    """Nothing: submitted once so a helper process imports this module before the first large body arrives."""


def _check_finite(quantiles: np.ndarray, median: np.ndarray) -> None:
    """A non-finite forecast cannot be sent as JSON; name the series instead of failing with 500."""
    bad = ~(np.isfinite(quantiles).all(axis=(1, 2)) & np.isfinite(median).all(axis=1))
    if bad.any():
        index = int(np.argmax(bad))
        raise InvalidRequest([{
            "type": "value_error", "loc": ["body", "inputs", index, "target"], "input": None,
            "msg": "the model's forecast for this series is not finite; its values are too extreme to scale",
        }])


# ----------------------------------------------------------------------------------------------------------------
# Short error bodies


def short_errors(errors: Sequence[Any], prefix: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """At most ``MAX_ERRORS`` errors, each with a short preview of its input and plain JSON-safe values, then one
    saying how many more there were: a 16 MB body must not come back as a 16 MB error."""
    short = [short_error(error, prefix) for error in list(errors)[:MAX_ERRORS]]
    if len(errors) > MAX_ERRORS:
        short.append({"type": "too_many_errors", "loc": ["body"], "input": None,
                      "msg": f"... and {len(errors) - MAX_ERRORS} more errors; fix these first"})
    return short


def short_error(error: Any, prefix: tuple[str, ...] = ()) -> dict[str, Any]:
    loc = [*prefix, *error.get("loc", ())]
    short = {"type": str(error.get("type")), "loc": [p if isinstance(p, int) else str(p) for p in loc],
             "msg": str(error.get("msg", "")), "input": _json_safe(preview(error.get("input")))}
    if error.get("ctx"):
        short["ctx"] = {str(k): _json_safe(preview(v)) for k, v in error["ctx"].items()}
    return short


def preview(value: Any) -> Any:
    """Small values as they are; large ones (long strings, lists, objects, bytes) as a short text preview."""
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value[:MAX_ECHO_CHARS]).decode("utf-8", "replace")
        return text + (f"... ({len(value)} bytes)" if len(value) > MAX_ECHO_CHARS else "")
    if isinstance(value, str):
        return value if len(value) <= MAX_ECHO_CHARS else value[:MAX_ECHO_CHARS] + f"... ({len(value)} characters)"
    if isinstance(value, (list, tuple, dict)):
        head = list(value[:20]) if isinstance(value, (list, tuple)) else dict(list(value.items())[:20])
        text = repr(head)
        if len(value) <= 20 and len(text) <= MAX_ECHO_CHARS and _plain(head):
            return head
        kind = "items" if isinstance(value, (list, tuple)) else "keys"
        return text[:MAX_ECHO_CHARS] + f"... ({len(value)} {kind})"
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return preview(str(value))  # exceptions in ctx, dates, anything else: as text


def _plain(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return value is None or isinstance(value, (bool, int, float, str))


def _json_safe(value: Any) -> Any:
    """Infinity and NaN (the very values refused) as strings: strict JSON cannot carry them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value
