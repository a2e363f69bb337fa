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
    max_body_bytes: int = Field(16 * MiB, gt=0, description="request body size in bytes (413 beyond)")
    request_timeout_s: float = Field(
        30.0, gt=0, description="seconds a forecast may wait and run before the request fails with 504"
    )

    batching: bool = Field(True, description="micro-batch concurrent requests into shared model calls")
    batch_window_ms: float = Field(
        5.0, ge=0, description="how long the first waiting request holds the batch open for others (milliseconds)"
    )
    max_batch_series: int = Field(256, gt=0, description="series in one model call; a bigger request runs alone")

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
    def _empty_key_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        """``TSFM_API_KEY=`` (empty) turns the key off instead of demanding an empty bearer token."""
        if value is not None and not value.get_secret_value():
            return None
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
            "max_body_bytes": self.max_body_bytes,
            "request_timeout_s": self.request_timeout_s,
        }
