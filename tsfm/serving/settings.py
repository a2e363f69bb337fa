"""Service configuration: one ``Settings`` object, read from ``TSFM_*`` environment variables or given in code.

Every limit the service enforces lives here with its default, so the limits are documented in one place (and
listed by ``GET /v1/models``). Environment variables are the interface for deployment (``TSFM_API_KEY=...
tsfm serve``) and for uvicorn worker processes, which build their own app from the environment; keyword arguments
to ``tsfm.serving.app.create_app`` override them in tests. This module only describes configuration: it loads nothing.
"""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

MiB = 1024 * 1024


class Settings(BaseSettings):
    """What the service serves and the limits it enforces; each field ``x`` is read from ``TSFM_X``.

    Limits protect a shared model from one client: a request past a limit is refused with 422 (413 for the body
    size) before any inference runs.
    """

    model_config = SettingsConfigDict(env_prefix="TSFM_", extra="forbid", frozen=True)

    model: str = Field("default", description="model to serve: 'default' (shipped with tsfm) or a checkpoint folder")
    device: str = Field("cpu", description="torch device the model runs on")

    max_series_per_request: int = Field(1000, gt=0, description="series in one request (422 beyond)")
    max_points_per_series: int = Field(
        20_000, gt=0, description="points in one series' target (422 beyond); the model reads only its last "
        "context_length points"
    )
    max_prediction_length: int = Field(1024, gt=0, description="largest horizon a request may ask for (422 beyond)")
    max_quantile_levels: int = Field(99, gt=0, description="quantile levels in one request (422 beyond)")
    max_forecast_values: int = Field(
        2_000_000, gt=0, description="numbers in one answer: series x prediction_length x (quantile levels + 1 for "
        "the median) (422 beyond); bounds the answer's size (about 10 bytes of JSON per number) and its memory"
    )
    max_calendar_timestamps: int = Field(
        50_000, gt=0, description="calendar timestamps one request may make pandas step through: distinct series "
        "ends x prediction_length, for calendar frequencies (business hours, months, weeks...), whose steps pandas "
        "takes one by one (422 beyond); fixed-length frequencies (h, D, min) are vectorised and not counted"
    )
    max_item_id_length: int = Field(256, gt=0, description="characters in a string item_id (422 beyond)")
    max_body_bytes: int = Field(16 * MiB, gt=0, description="request body size in bytes (413 beyond)")
    max_buffered_body_bytes: int = Field(
        64 * MiB, gt=0, description="request body bytes held by all requests in progress together; a body that "
        "would pass this gets 503 with Retry-After (bounds memory under many concurrent large bodies)"
    )
    body_timeout_s: float = Field(
        10.0, gt=0, description="seconds a client may take to send a request body once its headers arrived "
        "(408 and the connection closed beyond: a slowly sent body cannot hold a connection open)"
    )
    request_timeout_s: float = Field(
        30.0, gt=0, description="seconds a forecast may take from its parsed body to its answer: validation, "
        "timestamps, queueing, model calls (504 beyond)"
    )
    inline_parse_bytes: int = Field(
        256 * 1024, ge=0, description="bodies up to this size (and answers up to about this size) are parsed and "
        "written on a thread of the server process; larger ones in a helper process, since parsing holds Python's "
        "GIL for as long as it takes and would stall the event loop (a 16 MB body: about a second)"
    )
    helper_process: bool = Field(
        True, description="use the helper process for large bodies and answers (false: all on the parse thread)"
    )
    max_queued_series: int = Field(
        4096, gt=0, description="series waiting for the model, all requests together; a request that would pass "
        "this gets 503 with Retry-After instead of waiting (a full queue only adds latency)"
    )
    limit_concurrency: int = Field(
        512, gt=0, description="connections and requests uvicorn serves at once; beyond, it answers 503 itself "
        "(keep it under the process' open-file limit)"
    )
    timeout_keep_alive_s: float = Field(
        5.0, gt=0, description="seconds uvicorn keeps an idle keep-alive connection open"
    )

    batching: bool = Field(True, description="micro-batch concurrent requests into shared model calls")
    batch_window_ms: float = Field(
        5.0, ge=0, description="how long the first waiting request holds the batch open for others (milliseconds)"
    )
    max_batch_series: int = Field(
        64, gt=0, description="series in one model call, each counted once per forecast pass (a horizon past the "
        "model's trained one takes several); a bigger request is split into calls of at most this size that take "
        "turns with other requests, so one request holds the model for one call at a time and a timed-out one frees "
        "it within one call"
    )
    interactive_weight: int = Field(
        4, ge=1, description="while small requests (one model call or less) and parts of large ones both wait, the "
        "small ones get this many units of model work for each unit the large ones get (deficit round-robin): a "
        "bulk request cannot starve interactive clients, nor they it; 1 = equal shares"
    )

    stream_dir: str | None = Field(
        None, description="folder for stream snapshots: each acknowledged stream update is written there (atomically) "
        "before its answer, and the service reloads them at start-up, so a restart loses no acknowledged update; "
        "unset (default): streams live in memory only"
    )
    stream_idle_s: float = Field(
        3600.0, gt=0, description="seconds a stream may go without a request before it is removed (with its snapshot)"
    )
    max_streams: int = Field(
        1000, ge=0, description="open streams, all clients together (429 with Retry-After beyond); 0 turns the "
        "stream routes off (503)"
    )
    max_stream_bytes: int = Field(
        256 * MiB, gt=0, description="memory of all open streams together: the carried state tensors plus the kept "
        "tail (context_length values per series, counted at that size from the start); 507 beyond, 413 for a "
        "stream larger than this alone"
    )

    api_key: SecretStr | None = Field(
        None, description="when set, /v1/* requires 'Authorization: Bearer <key>' (401 otherwise)"
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="origins allowed by CORS, comma-separated; empty (default) = CORS off"
    )
    warmup: bool = Field(True, description="run one forecast after loading, before /ready answers 200")
    load_in_background: bool = Field(
        True, description="load the model after the server starts listening (/health answers, /ready is 503 until "
        "loaded); false: startup waits for the model, and fails if it cannot load"
    )
    torch_threads: int | None = Field(
        None, gt=0, description="torch threads of the model thread; default: one core less than the machine has "
        "(at least 1), so JSON parsing and validation on the event loop keep a core while the model runs"
    )

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        """``TSFM_CORS_ORIGINS=https://a.example,https://b.example`` -> a list; a list passes through."""
        if isinstance(value, str):
            return [origin.strip() for origin in value.split(",") if origin.strip()]
        return value

    @field_validator("api_key", mode="after")
    @classmethod
    def _check_key(cls, value: SecretStr | None) -> SecretStr | None:
        """``TSFM_API_KEY=`` (empty) turns the key off instead of demanding an empty bearer token.

        The key travels in an HTTP header, which carries bytes that clients encode differently (latin-1, UTF-8 or
        not at all): a key outside visible ASCII could never be matched reliably, so it is refused at start-up.
        """
        if value is None or not value.get_secret_value():
            return None
        key = value.get_secret_value()
        if not all(0x21 <= ord(char) <= 0x7E for char in key):
            raise ValueError("api_key (TSFM_API_KEY) must be visible ASCII characters without spaces")
        return value

    def resolved_torch_threads(self) -> int:
        """``torch_threads``, or the default: all cores but one for the model, one for the event loop.

        Measured on a 2-core machine: torch on both cores competes with the event loop (and spins its OpenMP
        threads while waiting), and throughput under concurrent load was about 2-3x lower than with one thread.
        """
        return self.torch_threads or max(1, (os.cpu_count() or 1) - 1)

    def public_limits(self) -> dict[str, int | float]:
        """The limits a client needs to know, as ``GET /v1/models`` reports them."""
        return {
            "max_series_per_request": self.max_series_per_request,
            "max_points_per_series": self.max_points_per_series,
            "max_prediction_length": self.max_prediction_length,
            "max_quantile_levels": self.max_quantile_levels,
            "max_forecast_values": self.max_forecast_values,
            "max_calendar_timestamps": self.max_calendar_timestamps,
            "max_item_id_length": self.max_item_id_length,
            "max_body_bytes": self.max_body_bytes,
            "request_timeout_s": self.request_timeout_s,
            "max_streams": self.max_streams,
            "max_stream_bytes": self.max_stream_bytes,
            "stream_idle_s": self.stream_idle_s,
        }
