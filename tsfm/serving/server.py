"""Run the service with uvicorn: what ``tsfm serve`` calls.

uvicorn imports ``tsfm.serving.server:app_from_environment`` as a factory in every worker process, so each worker
builds its own app (and its own model instance) from ``TSFM_*`` environment variables; ``run`` puts the command
line's choices there first. The model is checked here, before uvicorn starts, so a bad ``--model`` is one line of
error rather than a traceback per worker.
"""

from __future__ import annotations

import os

from fastapi import FastAPI

from tsfm.serving.registry import ServedModel
from tsfm.serving.settings import Settings


def app_from_environment() -> FastAPI:
    """The app as configured by ``TSFM_*`` environment variables (uvicorn's factory)."""
    from tsfm.serving.app import create_app

    return create_app(Settings())


def run(
    *, host: str = "127.0.0.1", port: int = 8000, model: str | None = None, workers: int = 1, log_level: str = "info"
) -> None:
    """Serve until interrupted.

    Args:
        host, port: where to listen (loopback by default: exposing the service is a deliberate choice).
        model: built-in name or checkpoint folder; ``None`` keeps ``TSFM_MODEL`` (default ``"default"``).
        workers: uvicorn worker processes, each with its own model and its share of the cores for torch (unless
            ``TSFM_TORCH_THREADS`` says otherwise); on CPU one worker uses the machine well already, since its
            model calls use all cores but one.

    Raises:
        tsfm.checkpoint.CheckpointError: the model is not a readable checkpoint; pydantic.ValidationError: a
            ``TSFM_*`` variable is invalid.
    """
    import uvicorn

    overrides = {} if model is None else {"model": str(model)}
    settings = Settings(**overrides)  # fail here, once, on bad environment variables
    ServedModel(settings.model, device=settings.device)  # reads the checkpoint's config: fails on a bad path
    os.environ["TSFM_MODEL"] = settings.model  # for the app factory in each worker
    if workers > 1 and settings.torch_threads is None:  # share the cores: each worker keeps one for its event loop
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
    )
