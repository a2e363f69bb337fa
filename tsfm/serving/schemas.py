"""Request and response models of the REST API (DESIGN §7), with the service's limits built in as validation.

Every check that can be made on the request alone happens here, in pydantic, so a bad request gets FastAPI's 422
body with ``loc`` naming the field (``["body", "inputs", 2, "target"]``) and never reaches the model. The limits
and the served model names differ per app (``Settings``), so ``build_schemas`` makes the request classes for one
app: the limits then show in its OpenAPI schema (``maxItems``, ``maximum``, the ``model`` enum) as well as being
enforced. Checks that need two fields at once (timestamps from ``start`` + ``freq`` + the horizon) happen in
``tsfm.serving.app``, which raises the same 422 shape.

Types are strict where JSON has a clear type: ``"1.5"`` is not a number and ``true`` is not 1, so what the schema
promises is what is accepted (schemathesis checks both directions): ``prediction_length`` takes any JSON integer,
``395.0`` included (JSON Schema's "integer"); ``freq`` and ``start`` are described by the regular expressions that
the validator itself applies (``FREQ_PATTERN``, ``START_PATTERN``), so a client can check a request before sending it.
What JSON Schema cannot say (a target observed within the context window, the size of the answer) is said in the
descriptions and refused with 422.
"""

from __future__ import annotations

import math
import re
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
    StrictBool,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic import Strict as StrictMarker

from tsfm.config import DEFAULT_QUANTILE_LEVELS
from tsfm.df_utils import parse_freq
from tsfm.stream import DEFAULT_MAX_DRIFT

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
]  # build_schemas adds the app's length limit
TargetValue = Annotated[  # bounds checked in _check_target (with NaN allowed, which JSON Schema cannot say)
    float, StrictMarker(), WithJsonSchema({"type": "number", "minimum": -MAX_ABS_VALUE, "maximum": MAX_ABS_VALUE})
] | None
Level = Annotated[float, StrictMarker(), Field(gt=0.0, lt=1.0)]


# ``freq``: the pandas aliases the service takes, with an optional multiplier. Only current spellings: the ones pandas
# 2.2 deprecated ("H", "T", "M", "A", ...) are gone in pandas 3, and a published schema must not change with pandas.
_MONTHS = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC"
_WEEKDAYS = "MON|TUE|WED|THU|FRI|SAT|SUN"
FREQ_ALIASES: tuple[str, ...] = (
    "us", "ms", "s", "min", "h", "D", "B", "bh", "W", "MS", "ME", "BMS", "BME", "SMS", "SME",
    "QS", "QE", "BQS", "BQE", "YS", "YE", "BYS", "BYE",
    *(f"W-{day}" for day in _WEEKDAYS.split("|")), "QS-FEB", "QE-JUN", "YS-JUL", "YE-MAR", "BQE-NOV", "BYS-APR",
)
"""Base aliases (the pattern also takes a multiplier such as ``15min`` and any month anchor on Q and Y)."""
FREQ_PATTERN = (
    rf"^([1-9][0-9]{{0,5}})?(us|ms|s|min|h|D|B|bh|W(-({_WEEKDAYS}))?|B?M[SE]|SM[SE]|B?[QY][SE](-({_MONTHS}))?)$"
)


def _date_pattern() -> str:
    """Calendar dates of years 0001-9999, exact to the leap day, as a regular expression (JSON Schema's dialect)."""
    year = "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
    by_four = "(0[48]|[2468][048]|[13579][26])"
    leap_year = f"([0-9]{{2}}{by_four}|{by_four}00)"
    return (
        f"({year}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
        f"|{year}-(0[469]|11)-(0[1-9]|[12][0-9]|30)"
        f"|{year}-02-(0[1-9]|1[0-9]|2[0-8])"
        f"|{leap_year}-02-29)"
    )


START_PATTERN = (
    f"^{_date_pattern()}"
    r"(T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?(Z|[+-]([01][0-9]|2[0-3]):?[0-5][0-9])?)?$"
)
"""ISO 8601 as the service reads it: a date (``2024-01-31``), or a date and time with optional seconds, fraction
and UTC offset (``2024-01-31T09:30``, ``2024-01-31T09:30:00.5+01:00``, ``...Z``). No bare numbers (Unix time is
not a date), no space for ``T``."""
_START = re.compile(START_PATTERN.removeprefix("^").removesuffix("$"))
_FREQ = re.compile(FREQ_PATTERN.removeprefix("^").removesuffix("$"))
START_HELP = "start must be an ISO 8601 date or date-time such as '2024-01-31' or '2024-01-31T09:30:00+01:00'"


def _parse_start(value: Any) -> Any:
    """``start`` must match ``START_PATTERN`` (checked with fullmatch, as JSON Schema's anchors mean)."""
    if not isinstance(value, str) or not _START.fullmatch(value):
        shown = repr(value)[:60]
        raise ValueError(f"{START_HELP}, got {shown}")
    return datetime.fromisoformat(value)


Start = Annotated[
    datetime,
    BeforeValidator(_parse_start),
    WithJsonSchema({"type": "string", "pattern": START_PATTERN}),
    Field(description="time of the first target value, ISO 8601: a date, or a date-time with optional UTC offset "
          "('2024-01-31', '2024-01-31T09:30:00+01:00'); with freq, the answer carries timestamps. A start off "
          "the freq grid is taken at the next grid point (with a warning)"),
]


def _integral(value: Any) -> Any:
    """JSON Schema's "integer" includes ``395.0``; pydantic's strict int would refuse it."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


PredictionLength = Annotated[StrictInt, BeforeValidator(_integral)]
"""A JSON integer: what JSON Schema's "integer" admits (``395.0`` too), and nothing else (``"395"``, ``true``)."""


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
    freq: Annotated[StrictStr, WithJsonSchema({"type": "string", "pattern": FREQ_PATTERN})] | None = Field(
        None, description="pandas frequency alias of the series, with an optional multiplier: 'h', '15min', 'D', "
        "'B', 'bh', 'W-SUN', 'MS', 'ME', 'QS', 'YE' ... (the pattern lists them all)"
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
        """The pattern (checked by pydantic) admits only aliases pandas reads; this confirms it, whatever pandas is
        installed."""
        if freq is None:
            return None
        if freq.startswith("-"):
            raise ValueError(f"freq must step forward in time, got {freq[:40]!r}")
        if not _FREQ.fullmatch(freq):
            raise ValueError(
                f"unknown freq {freq[:40]!r}; use a pandas alias with an optional multiplier: 'h', '15min', 'D', 'B', "
                "'bh', 'W-SUN', 'MS', 'ME', 'QS', 'YE' ... (the OpenAPI schema's pattern lists them all)"
            )
        try:
            parse_freq(freq)
        except Exception:  # pandas raises assorted types for odd strings; all mean the same to the client
            raise ValueError(f"unknown freq {freq!r}; use a pandas alias such as 'h', 'D', 'W-SUN', 'MS'") from None
        return freq


INFER_NONNEGATIVE = (
    "true: a series whose values are never negative gets no negative forecast (quantiles below 0 set to 0); false: "
    "forecasts are left as the model gives them; null (default): the model's own setting (on for the shipped models, "
    "/v1/models)"
)
"""The ``infer_nonnegative`` field's description (``tsfm.predict``'s option of the same name), shared by both
forecast routes."""

NaiveBlend = Literal["off", "inverse_mae", "inverse_mse", "switch"]
"""``tsfm.config.NAIVE_BLENDS`` spelt for the schema (a test checks that they agree)."""

NAIVE_BLEND = (
    "inverse_mae, inverse_mse or switch: move each forecast towards Seasonal Naive by how the two forecast the "
    "series' own last steps (tsfm.naive_blend); off: the model's own forecast; null (default): the model's own "
    "setting (/v1/models)"
)

FLIP_EQUIVARIANT = (
    "true: forecast each series as it is and upside down and average the two (the second turned back), so that -x is "
    "forecast as exactly minus x's forecast, at twice the compute; false: once; null (default): the model's own "
    "setting (/v1/models)"
)


class ParametersBase(BaseModel):
    """How to forecast: the horizon, the quantile levels and the model."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    quantile_levels: list[Level] = Field(
        default_factory=lambda: list(DEFAULT_QUANTILE_LEVELS),
        description="quantile levels to return, each strictly inside (0, 1), none repeated; levels the model does "
        "not predict are interpolated, and ones outside its range take its outermost quantile",
    )
    infer_nonnegative: StrictBool | None = Field(None, description=INFER_NONNEGATIVE)
    naive_blend: NaiveBlend | None = Field(None, description=NAIVE_BLEND)
    flip_equivariant: StrictBool | None = Field(None, description=FLIP_EQUIVARIANT)

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
    """The forecast of one series: the ``median``, and one array per requested quantile level.

    The quantile keys are the levels as written by Python's ``str(float)`` (``"0.1"``, ``"0.05"``), the same names
    ``tsfm.predict_df`` gives its columns.
    """

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, list[float]] = Field(init=False)  # the quantile arrays

    item_id: StrictStr | StrictInt
    timestamps: list[str] | None = Field(
        None, description="ISO 8601 timestamps of the forecast steps; only when the input had start and freq"
    )
    median: list[float] = Field(description="median forecast (the 0.5 quantile), one value per step")


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
    decoding: str = Field(description="how forecasts past the first patch are made (masked or autoregressive)")
    infer_nonnegative: bool = Field(description="what a request's infer_nonnegative=null means: whether series "
                                    "that were never negative get no negative forecast")
    naive_blend: str = Field("off", description="what a request's naive_blend=null means (off, inverse_mae, "
                             "inverse_mse, switch)")
    flip_equivariant: bool = Field(False, description="what a request's flip_equivariant=null means: whether each "
                                   "forecast is averaged with the upside-down series' forecast turned back")


class ModelsResponse(BaseModel):
    models: list[ModelInfo]
    limits: dict[str, int | float] = Field(description="the limits this service enforces on a request")


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    status: Literal["ready", "loading", "failed"]
    detail: str | None = None


class ErrorDetail(BaseModel):
    """Body of the non-422 errors (401, 408, 413, 503, 504): FastAPI's ``{"detail": "..."}``."""

    detail: str


class ValidationIssue(BaseModel):
    """One reason a request was refused, FastAPI's shape: where (``loc``), what (``msg``), and a short preview of
    the bad input (never more than a few dozen characters of it)."""

    loc: list[str | int] = Field(description="path to the field at fault: ['body', 'inputs', 2, 'target']")
    msg: str
    type: str
    input: Any = None
    ctx: dict[str, Any] | None = None


class ValidationErrorBody(BaseModel):
    """Body of a 422: at most 20 issues, then one saying how many more there were."""

    detail: list[ValidationIssue]


# ----------------------------------------------------------------------------------------------------------------
# One app's request classes


class ForecastSchemas(NamedTuple):
    request: type[ForecastRequestBase]
    series: type[SeriesInputBase]
    parameters: type[ParametersBase]


def _quantile_levels_field(max_quantile_levels: int) -> Any:
    """The ``quantile_levels`` field of a forecast (plain or stream) with one app's limit."""
    return Field(
        default_factory=lambda: list(DEFAULT_QUANTILE_LEVELS),
        min_length=1,
        max_length=max_quantile_levels,
        json_schema_extra={"uniqueItems": True},
        description=ParametersBase.model_fields["quantile_levels"].description,
    )


def build_schemas(
    *,
    model_names: Sequence[str],
    context_length: int,
    max_series_per_request: int,
    max_points_per_series: int,
    max_prediction_length: int,
    max_quantile_levels: int,
    max_forecast_values: int = 2_000_000,
    max_item_id_length: int = 256,
) -> ForecastSchemas:
    """Request classes with one app's limits and model names in their fields (so also in its OpenAPI schema)."""
    names = tuple(model_names)
    model_type: Any = Literal[names]  # Literal["a", "b"] == Literal[("a", "b")]
    item_id_type: Any = Annotated[
        Annotated[StrictStr, Field(max_length=max_item_id_length)]
        | Annotated[PredictionLength, Field(ge=-INT64, lt=INT64),  # any JSON integer, 7.0 included
                    WithJsonSchema({"type": "integer", "minimum": -INT64, "exclusiveMaximum": INT64})],
        AfterValidator(_encodable),
        Field(description="series id, echoed in the answer (default: position)"),
    ]
    # JSON Schema cannot say "observed within the last context_length values", but it can say "observed": exact
    # when the points limit is within the context
    observed = {"contains": {"type": "number"}}

    class SeriesInput(SeriesInputBase):
        target: list[TargetValue] = Field(
            min_length=1,
            max_length=max_points_per_series,
            json_schema_extra=observed,
            description=SeriesInputBase.model_fields["target"].description,
        )
        item_id: item_id_type | None = None

    SeriesInput.context_length = context_length

    class Parameters(ParametersBase):
        prediction_length: PredictionLength = Field(
            gt=0, le=max_prediction_length, description="steps to forecast after the end of every series"
        )
        quantile_levels: list[Level] = _quantile_levels_field(max_quantile_levels)
        model: model_type | None = Field(None, description=f"model to use (default: {names[0]!r}); see /v1/models")

    class ForecastRequest(ForecastRequestBase):
        inputs: list[SeriesInput] = Field(
            min_length=1, max_length=max_series_per_request, description="the series to forecast"
        )
        parameters: Parameters

        model_config = ConfigDict(
            extra="forbid", json_schema_extra={"examples": [REQUEST_EXAMPLES["minimal"]["value"]]}
        )

        @model_validator(mode="after")
        def _check_answer_size(self) -> ForecastRequest:
            """The answer holds series x horizon x (levels + median) numbers: bound it before any work is done."""
            n, horizon = len(self.inputs), self.parameters.prediction_length
            arrays = len(self.parameters.quantile_levels) + 1
            values = n * horizon * arrays
            if values > max_forecast_values:
                raise ValueError(
                    f"the answer would hold {n} series x {horizon} steps x {arrays} arrays (quantile levels + "
                    f"median) = {values} numbers, over the limit of {max_forecast_values} (max_forecast_values); "
                    "split the series over several requests, or ask for fewer steps or levels"
                )
            return self

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


# ----------------------------------------------------------------------------------------------------------------
# Streams (issue 15): open a stream of series, append observations, forecast from the carried state

STREAM_ID_PATTERN = r"^[A-Za-z0-9_-]{32}$"
"""A stream id: ``secrets.token_urlsafe(24)`` (32 URL-safe characters). Checked before any file path is built."""


def _check_update_row(row: list[float | None]) -> list[float | None]:
    """New values of one series: null/NaN are missing steps; infinities and huge magnitudes are refused."""
    values = np.asarray(row, dtype=np.float64)
    infinite = np.flatnonzero(np.isinf(values))
    if infinite.size:
        raise ValueError(f"values has infinite values (at positions {_positions(infinite)}); use null for missing "
                         "values")
    huge = np.flatnonzero(np.abs(values) > MAX_ABS_VALUE)
    if huge.size:
        raise ValueError(f"values beyond +-{MAX_ABS_VALUE:g} (at positions {_positions(huge)}), which the model "
                         "cannot scale in float32; rescale the series")
    return row


class StreamOpenRequestBase(BaseModel):
    """``POST /v1/streams`` body: the series to stream (as ``/v1/forecast`` takes them) and the model."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class StreamUpdateRequestBase(BaseModel):
    """``POST /v1/streams/{stream_id}/observations`` body: new values of every series, oldest first."""

    model_config = ConfigDict(extra="forbid")


class StreamForecastRequestBase(BaseModel):
    """``POST /v1/streams/{stream_id}/forecast`` body: the horizon and quantile levels, as ``/v1/forecast`` takes."""

    model_config = ConfigDict(extra="forbid")

    infer_nonnegative: StrictBool | None = Field(None, description=INFER_NONNEGATIVE)
    naive_blend: NaiveBlend | None = Field(None, description=NAIVE_BLEND + "; off keeps the forecast to the carried "
                                           "state, the others re-read each series' kept tail for the backtest")


class StreamOpened(BaseModel):
    stream_id: str = Field(description="the stream's id, for its other routes (keep it: it is the only handle)")
    series: int = Field(description="number of series in the stream; every update gives this many")
    expires_in_s: float = Field(description="seconds of inactivity after which the stream is removed")
    warnings: list[str] = Field(default_factory=list)


class StreamUpdated(BaseModel):
    stream_id: str
    steps: list[int] = Field(description="steps appended to each series by this update")
    buffered: list[int] = Field(description="steps of each series waiting for their patch to complete")
    patches_completed: list[int] = Field(description="patches of each series completed (read into the state) by "
                                         "this update")
    reanchors: list[int] = Field(description="re-anchors of each series since the stream opened (its scale refitted "
                                 "after the series drifted)")
    expires_in_s: float


class StreamSchemas(NamedTuple):
    open: type[StreamOpenRequestBase]
    update: type[StreamUpdateRequestBase]
    forecast: type[StreamForecastRequestBase]


def build_stream_schemas(
    base: ForecastSchemas,
    *,
    model_names: Sequence[str],
    max_series_per_request: int,
    max_points_per_series: int,
    max_prediction_length: int,
    max_quantile_levels: int,
) -> StreamSchemas:
    """The stream request classes of one app, reusing the series class of its ``build_schemas`` result."""
    names = tuple(model_names)
    model_type: Any = Literal[names]
    series_class: Any = base.series
    row_type: Any = Annotated[
        list[TargetValue], Field(max_length=max_points_per_series), AfterValidator(_check_update_row)
    ]
    stamp_row: Any = Annotated[list[Start], Field(max_length=max_points_per_series)]

    class StreamOpenRequest(StreamOpenRequestBase):
        inputs: list[series_class] = Field(  # type: ignore[valid-type]
            min_length=1, max_length=max_series_per_request,
            description="the series to stream, as /v1/forecast takes them; the stream reads the last "
            "context_length values of each",
        )
        model: model_type | None = Field(None, description=f"model to use (default: {names[0]!r}); see /v1/models")
        max_drift: float | None = Field(
            DEFAULT_MAX_DRIFT, gt=1.0, le=1e6, strict=True,
            description="re-anchoring bound: a series whose recent scale grows or shrinks by more than this factor, "
            "or whose level moves by more than this many opening scales, has its scale refitted and its state "
            f"recomputed from its kept tail (reported in `reanchors`); null never re-anchors (default "
            f"{DEFAULT_MAX_DRIFT})",
        )

    class StreamUpdateRequest(StreamUpdateRequestBase):
        values: list[row_type] = Field(  # type: ignore[valid-type]
            min_length=1, max_length=max_series_per_request,
            description="new values of each series, oldest first, one list per series of the stream (in the order "
            f"it was opened; an empty list adds nothing); null (or NaN) marks a missing step; at most "
            f"{max_points_per_series} values per series and update",
        )
        timestamps: list[stamp_row | None] | None = Field(  # type: ignore[valid-type]
            None, description="optional: the time of each new value, one list per series (null for a series "
            "without); a series opened with start and freq must continue its grid exactly: the first timestamp is "
            "the step after its last observation, each next one the step after that (send null values for missing "
            "steps)",
        )

    class StreamForecastRequest(StreamForecastRequestBase):
        prediction_length: PredictionLength = Field(
            gt=0, le=max_prediction_length, description="steps to forecast after the last observation of every series"
        )
        quantile_levels: list[Level] = _quantile_levels_field(max_quantile_levels)

        @field_validator("quantile_levels", mode="after")
        @classmethod
        def _check_unique(cls, levels: list[float]) -> list[float]:
            return ParametersBase._check_unique(levels)

    return StreamSchemas(StreamOpenRequest, StreamUpdateRequest, StreamForecastRequest)
