"""Run the service with uvicorn: what ``tsfm serve`` calls.

uvicorn imports ``tsfm.serving.server:app_from_environment`` as a factory in every worker process, so each worker
builds its own app (and its own model instance) from ``TSFM_*`` environment variables; ``run`` puts the command
line's choices there first. The model is checked here, before uvicorn starts, so a bad ``--model`` is one line of
error rather than a traceback per worker.

Connections are bounded here, where uvicorn is configured: ``limit_concurrency`` (503 from uvicorn beyond),
``timeout_keep_alive`` for idle connections, and a deadline for request headers (``HeaderDeadlineH11Protocol``):
uvicorn's own keep-alive timer stops at the first byte of a request, so a client sending its headers a byte at a
time would hold a connection for ever. The body's deadline is the app's (``tsfm.serving.limits``).
"""

from __future__ import annotations

import os
from typing import Any

import h11
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from tsfm.serving.registry import ServedModel
from tsfm.serving.settings import Settings


def app_from_environment() -> FastAPI:
    """The app as configured by ``TSFM_*`` environment variables (uvicorn's factory)."""
    from tsfm.serving.app import create_app

    return create_app(Settings())


class HeaderDeadlineH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection whose request headers take longer than
    ``timeout_keep_alive`` to arrive (the first request's and every later one's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: Any = None

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm_header_deadline()  # waiting for (more of) a request's headers
        elif self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
        super().connection_lost(exc)

    def _arm_header_deadline(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(self.timeout_keep_alive, self._headers_too_slow)

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        # IDLE: no request's headers complete since the timer started (during a request the state is SEND_BODY or
        # DONE until its response is sent)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def run(
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    model: str | None = None,
    workers: int = 1,
    log_level: str = "info",
    settings: dict[str, Any] | None = None,
) -> None:
    """Serve until interrupted.

    Args:
        host, port: where to listen (loopback by default: exposing the service is a deliberate choice).
        model: built-in name or checkpoint folder; ``None`` keeps ``TSFM_MODEL`` (default ``"default"``).
        workers: uvicorn worker processes, each with its own model and its share of the cores for torch (unless
            ``TSFM_TORCH_THREADS`` says otherwise); on CPU one worker uses the machine well already, since its
            model calls use all cores but one. Streams live in one process, so with several workers the stream
            routes are off (``max_streams=0``) unless streams were asked for, which is refused.
        settings: other ``Settings`` fields from the command line (``stream_dir``, ``max_streams``...); they are
            put in ``TSFM_*`` variables for the workers.

    Raises:
        tsfm.checkpoint.CheckpointError: the model is not a readable checkpoint; pydantic.ValidationError: a
            ``TSFM_*`` variable is invalid.
    """
    import uvicorn

    overrides: dict[str, Any] = dict(settings or {})
    if model is not None:
        overrides["model"] = str(model)
    resolved = Settings(**overrides)  # fail here, once, on bad environment variables or flags
    if workers > 1 and resolved.max_streams > 0:
        asked = {"max_streams", "stream_dir"} & overrides.keys()
        if asked or os.environ.get("TSFM_MAX_STREAMS") or os.environ.get("TSFM_STREAM_DIR"):
            raise ValueError("streams live in one process: use --workers 1 with streams (or --max-streams 0)")
        overrides["max_streams"] = 0  # a stream opened on one worker would be unknown to the others
    ServedModel(resolved.model, device=resolved.device)  # reads the checkpoint's config: fails on a bad path
    for name, value in {**overrides, "model": resolved.model}.items():  # for the app factory in each worker
        os.environ[f"TSFM_{name.upper()}"] = str(value)
    if workers > 1 and resolved.torch_threads is None:  # share the cores: each worker keeps one for its event loop
        cores = os.cpu_count() or 1
        os.environ["TSFM_TORCH_THREADS"] = str(max(1, (cores - workers) // workers))
    uvicorn.run(
        "tsfm.serving.server:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        timeout_graceful_shutdown=10,
        **uvicorn_limits(resolved),
    )


def uvicorn_limits(settings: Settings) -> dict[str, Any]:
    """The connection limits of ``Settings`` as ``uvicorn.run``/``uvicorn.Config`` arguments."""
    return {
        "limit_concurrency": settings.limit_concurrency,
        "timeout_keep_alive": settings.timeout_keep_alive_s,
        "http": HeaderDeadlineH11Protocol,
    }
