"""Request and response models of the REST API (DESIGN §7), with the service's limits built in as validation.

Every check that can be made on the request alone happens here, in pydantic, so a bad request gets FastAPI's 422
body with ``loc`` naming the field (``["body", "inputs", 2, "target"]``) and never reaches the model. The limits
and the served model names differ per app (``Settings``), so ``build_schemas`` makes the request classes for one
app: the limits then show in its OpenAPI schema (``maxItems``, ``maximum``, the ``model`` enum) as well as being
enforced. Checks that need two fields at once (timestamps from ``start`` + ``freq`` + the horizon) happen in
``tsfm.serving.app``, which raises the same 422 shape.

Types are strict where JSON has a clear type: ``"1.5"`` is not a number and ``true`` is not 1, so what the schema
promises is what is accepted (schemathesis checks both directions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    field_validator,
)
from pydantic import Strict as StrictMarker

from tsfm.config import DEFAULT_QUANTILE_LEVELS
from tsfm.df_utils import ForecastInputError, parse_freq

MAX_ABS_VALUE = 1e15
"""Largest magnitude accepted in a target: the model computes in float32, where the scaler's variance of values
much beyond this overflows and the forecast turns into NaN. Real series stay far below it."""

INT64 = 2**63


def _encodable(value: str | int) -> str | int:
    """JSON strings may carry unpaired surrogates (``"\\ud800"``), which no UTF-8 answer can echo back."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("must be valid Unicode text: it has an unpaired surrogate") from None
    return value


ItemId = Annotated[
    StrictStr | Annotated[StrictInt, Field(ge=-INT64, lt=INT64)],  # echoed as a 64-bit JSON integer
    AfterValidator(_encodable),
    Field(description="series id, echoed in the answer (default: position)"),
]
TargetValue = Annotated[  # bounds checked in _check_target (with NaN allowed, which JSON Schema cannot say)
    float, StrictMarker(), WithJsonSchema({"type": "number", "minimum": -MAX_ABS_VALUE, "maximum": MAX_ABS_VALUE})
] | None
Level = Annotated[float, StrictMarker(), Field(gt=0.0, lt=1.0)]


def _require_string(value: Any) -> Any:
    """``start`` must be an ISO 8601 string; pydantic would otherwise also take a bare number as a Unix time."""
    if not isinstance(value, str):
        raise ValueError("start must be an ISO 8601 date-time string such as '2024-01-01T00:00:00'")
    return _encodable(value)


Start = Annotated[
    datetime,
    BeforeValidator(_require_string),
    WithJsonSchema({"type": "string", "format": "date-time"}),
    Field(description="timestamp of the first target value (ISO 8601); with freq, the answer carries timestamps"),
]


# ----------------------------------------------------------------------------------------------------------------
# Requests: base classes hold the checks; build_schemas adds one app's limits


class SeriesInputBase(BaseModel):
    """One series to forecast: its past values, and optionally an id and a time axis."""

    model_config = ConfigDict(extra="forbid")
    context_length: ClassVar[int] = 2048  # set per app: the model reads only this many last points

    target: list[TargetValue] = Field(
        description="past values, oldest first; null (or NaN) marks a missing value. At least one of the last "
        "context_length values must be observed; infinities and magnitudes above 1e15 are refused."
    )
    item_id: ItemId | None = None
    start: Start | None = None
    freq: StrictStr | None = Field(
        None, description="pandas frequency alias of the series: 'h', 'D', 'W-SUN', 'MS', '15min'"
    )

    @field_validator("target", mode="after")
    @classmethod
    def _check_target(cls, target: list[float | None]) -> list[float | None]:
        """The checks ``tsfm.predict`` makes, vectorised, so a bad series fails here and not in a shared batch."""
        values = np.asarray(target, dtype=np.float64)  # None -> NaN
        infinite = np.flatnonzero(np.isinf(values))
        if infinite.size:
            raise ValueError(
                f"target has infinite values (at positions {_positions(infinite)}); use null for missing values"
            )
        huge = np.flatnonzero(np.abs(values) > MAX_ABS_VALUE)
        if huge.size:
            raise ValueError(
                f"target has values beyond +-{MAX_ABS_VALUE:g} (at positions {_positions(huge)}), which the model "
                "cannot scale in float32; rescale the series"
            )
        window = values[-cls.context_length :]
        if np.isnan(window).all():
            where = "" if len(values) <= cls.context_length else f" in its last {cls.context_length} values"
            raise ValueError(f"target has no observed values{where}: all are null or NaN")
        return target

    @field_validator("freq", mode="after")
    @classmethod
    def _check_freq(cls, freq: str | None) -> str | None:
        if freq is None:
            return None
        _encodable(freq)  # before pandas quotes it in an error message
        try:
            offset = parse_freq(freq)
        except ForecastInputError as err:
            raise ValueError(str(err)) from None
        except Exception:  # pandas raises assorted types for odd strings; all mean the same to the client
            raise ValueError(f"unknown freq {freq!r}; use a pandas alias such as 'h', 'D', 'W-SUN', 'MS'") from None
        if offset.n <= 0:
            raise ValueError(f"freq must step forward in time, got {freq!r}")
        return freq


class ParametersBase(BaseModel):
    """How to forecast: the horizon, the quantile levels and the model."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    quantile_levels: list[Level] = Field(
        default_factory=lambda: list(DEFAULT_QUANTILE_LEVELS),
        description="quantile levels to return, each strictly inside (0, 1), none repeated; levels the model does "
        "not predict are interpolated, and ones outside its range take its outermost quantile",
    )

    @field_validator("quantile_levels", mode="after")
    @classmethod
    def _check_unique(cls, levels: list[float]) -> list[float]:
        repeated = sorted({q for q in levels if levels.count(q) > 1})
        if repeated:
            raise ValueError(f"quantile_levels has repeated levels {repeated}; give each level once")
        return levels


class ForecastRequestBase(BaseModel):
    """``POST /v1/forecast`` body: many series, one set of parameters."""

    model_config = ConfigDict(extra="forbid")


# ----------------------------------------------------------------------------------------------------------------
# Responses


class SeriesForecast(BaseModel):
    """The forecast of one series: the median as ``mean``, and one array per requested quantile level.

    The quantile keys are the levels as written by Python's ``str(float)`` (``"0.1"``, ``"0.05"``), the same names
    ``tsfm.predict_df`` gives its columns.
    """

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, list[float]] = Field(init=False)  # the quantile arrays

    item_id: StrictStr | StrictInt
    timestamps: list[str] | None = Field(
        None, description="ISO 8601 timestamps of the forecast steps; only when the input had start and freq"
    )
    mean: list[float] = Field(description="median forecast (the 0.5 quantile), one value per step")


class ForecastResponse(BaseModel):
    """``POST /v1/forecast`` answer: one forecast per input series, in input order."""

    model: str = Field(description="name of the model that made the forecast")
    predictions: list[SeriesForecast]
    warnings: list[str] = Field(
        default_factory=list, description="caveats, e.g. a horizon past the one the model was trained on"
    )


class ModelInfo(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    name: str
    default: bool = Field(description="used when a request names no model")
    ready: bool = Field(description="loaded and warmed up")
    backbone: str
    parameters: int | None = Field(description="number of weights; null until the model is loaded")
    context_length: int = Field(description="last points of each series the model reads")
    patch_size: int
    trained_horizon: int = Field(description="steps forecast in training; longer horizons are extrapolated")
    quantile_levels: list[float] = Field(description="levels the model predicts; others are interpolated")


class ModelsResponse(BaseModel):
    models: list[ModelInfo]
    limits: dict[str, int | float] = Field(description="the limits this service enforces on a request")


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    status: Literal["ready", "loading", "failed"]
    detail: str | None = None


class ErrorDetail(BaseModel):
    """Body of the non-422 errors (401, 413, 503, 504): FastAPI's ``{"detail": "..."}``."""

    detail: str


# ----------------------------------------------------------------------------------------------------------------
# One app's request classes


class ForecastSchemas(NamedTuple):
    request: type[ForecastRequestBase]
    series: type[SeriesInputBase]
    parameters: type[ParametersBase]


def build_schemas(
    *,
    model_names: Sequence[str],
    context_length: int,
    max_series_per_request: int,
    max_points_per_series: int,
    max_prediction_length: int,
    max_quantile_levels: int,
) -> ForecastSchemas:
    """Request classes with one app's limits and model names in their fields (so also in its OpenAPI schema)."""
    names = tuple(model_names)
    model_type: Any = Literal[names]  # Literal["a", "b"] == Literal[("a", "b")]

    class SeriesInput(SeriesInputBase):
        target: list[TargetValue] = Field(
            min_length=1,
            max_length=max_points_per_series,
            description=SeriesInputBase.model_fields["target"].description,
        )

    SeriesInput.context_length = context_length

    class Parameters(ParametersBase):
        prediction_length: StrictInt = Field(
            gt=0, le=max_prediction_length, description="steps to forecast after the end of every series"
        )
        quantile_levels: list[Level] = Field(
            default_factory=lambda: list(DEFAULT_QUANTILE_LEVELS),
            min_length=1,
            max_length=max_quantile_levels,
            json_schema_extra={"uniqueItems": True},
            description=ParametersBase.model_fields["quantile_levels"].description,
        )
        model: model_type | None = Field(None, description=f"model to use (default: {names[0]!r}); see /v1/models")

    class ForecastRequest(ForecastRequestBase):
        inputs: list[SeriesInput] = Field(
            min_length=1, max_length=max_series_per_request, description="the series to forecast"
        )
        parameters: Parameters

        model_config = ConfigDict(
            extra="forbid", json_schema_extra={"examples": [REQUEST_EXAMPLES["minimal"]["value"]]}
        )

    return ForecastSchemas(ForecastRequest, SeriesInput, Parameters)


def _positions(index: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(i) for i in index[:limit])
    return shown + (", ..." if len(index) > limit else "")


def _example_series(n: int, phase: float) -> list[float]:
    return [round(10 + 3 * math.sin(2 * math.pi * (t + phase) / 24), 3) for t in range(n)]


REQUEST_EXAMPLES: dict[str, dict[str, Any]] = {
    "minimal": {
        "summary": "One series, default quantiles",
        "value": {"inputs": [{"target": _example_series(72, 0)}], "parameters": {"prediction_length": 24}},
    },
    "timestamps": {
        "summary": "Two hourly series with ids and timestamps, three quantiles",
        "value": {
            "inputs": [
                {"item_id": "north", "start": "2024-01-01T00:00:00", "freq": "h", "target": _example_series(72, 0)},
                {"item_id": "south", "start": "2024-01-01T00:00:00", "freq": "h", "target": _example_series(72, 6)},
            ],
            "parameters": {"prediction_length": 12, "quantile_levels": [0.1, 0.5, 0.9]},
        },
    },
    "missing": {
        "summary": "Missing values as null",
        "value": {
            "inputs": [{"target": [5.0, 6.0, None, 7.5, 8.0, None, 9.1, 9.9]}],
            "parameters": {"prediction_length": 4, "quantile_levels": [0.25, 0.5, 0.75]},
        },
    },
}
