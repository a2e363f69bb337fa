"""The app factory: ``create_app(model=..., **settings) -> FastAPI`` with every route of the service.

Routes: ``POST /v1/forecast``, the stream routes (``POST /v1/streams``, ``POST /v1/streams/{id}/observations``,
``POST /v1/streams/{id}/forecast``, ``DELETE /v1/streams/{id}``; the streams themselves live in
``tsfm.serving.streams``), ``GET /v1/models``, ``GET /health``, ``GET /ready``, ``GET /metrics``, the
OpenAPI schema, ``/docs`` and ``/redoc`` (local assets), and the forecast page at ``/``. This module wires the parts
together (settings, schemas, the served model, the batcher, limits, auth, metrics) and turns arrays into JSON; it
does no inference itself and holds no module-level state, so tests build as many independent apps as they like.

Startup: the model's config is read when the app is built (a bad ``--model`` fails at once); the weights load and
warm up on the model thread once the server runs, and ``/ready`` answers 200 only after that. Forecast requests
before then get 503 with ``Retry-After``.

A forecast request keeps the event loop free: the middleware checks the key and the body's size and deadline without
parsing; parsing, validation and timestamps run on a worker thread (``tsfm-parse``), the model on the model thread,
and the answer is written to JSON on the worker thread again. All of it runs inside ``request_timeout_s``. The event
loop only moves bytes and futures, so ``/health`` answers while the heaviest in-limit request is being served.

No ``from __future__ import annotations`` here: the request class is built per app, and FastAPI must see the real
class in the endpoint's signature, not a string it cannot resolve.
"""

import asyncio
import json
import logging
import multiprocessing
import os
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from tsfm import __version__
from tsfm.df_utils import ForecastInputError
from tsfm.serving import parsing, streams
from tsfm.serving.auth import ApiKeyMiddleware, api_key_dependency
from tsfm.serving.batching import BatcherClosed, MicroBatcher, QueueFull
from tsfm.serving.docs import add_offline_docs
from tsfm.serving.helper_process import exit_with_parent
from tsfm.serving.limits import BodyLimitMiddleware
from tsfm.serving.metrics import Metrics, MetricsMiddleware
from tsfm.serving.registry import ModelSource, ServedModel
from tsfm.serving.schemas import (
    REQUEST_EXAMPLES,
    ErrorDetail,
    ForecastResponse,
    Health,
    ModelInfo,
    ModelsResponse,
    Readiness,
    StreamOpened,
    StreamUpdated,
    ValidationErrorBody,
)
from tsfm.serving.settings import Settings
from tsfm.serving.timestamps import TimestampsTooCostly, check_calendar_cost, series_ends
from tsfm.stream import StreamError

PAGE_DIR = Path(__file__).parent / "page"
API_DESCRIPTION = """Zero-shot probabilistic forecasts from a pretrained tsfm model.

Send one or many series to `POST /v1/forecast`; the answer holds the `median` and the requested quantile levels
for each series, plus timestamps when a series gives `start` and `freq`. Concurrent requests are micro-batched onto
one model. Bad input gets a 422 whose `detail[].loc` names the field at fault; the limits are listed by
`GET /v1/models`.
"""
log = logging.getLogger("tsfm.serving")


@dataclass
class Service:
    """What the routes share; one per app, kept on ``app.state.service``."""

    settings: Settings
    served: ServedModel
    metrics: Metrics
    executor: ThreadPoolExecutor | None = None  # the model thread; one per run of the app (startup to shutdown)
    spec: parsing.RequestSpec | None = None  # this app's request class, rebuildable in the helper process
    parser: ThreadPoolExecutor | None = None  # parsing, validation, timestamps, JSON answers: off the event loop
    helper: ProcessPoolExecutor | None = None  # the same for large bodies and answers, started on first use
    batcher: MicroBatcher | None = None
    loader: "asyncio.Task[None] | None" = None
    stream_store: streams.StreamStore | None = None  # the open streams (tsfm.serving.streams)
    stream_bytes_per_series: int = 0  # known once the model is loaded; 0: the model cannot stream
    sweeper: "asyncio.Task[None] | None" = None  # removes idle streams periodically


def create_app(settings: Settings | None = None, *, model: ModelSource | None = None, **overrides: Any) -> FastAPI:
    """Build the service.

    Args:
        settings: a complete ``Settings``; by default read from ``TSFM_*`` environment variables.
        model: the model to serve: a built-in name, a checkpoint folder, or a loaded model object; overrides
            ``settings.model``. Tests pass a tiny checkpoint here so they never depend on the shipped model.
        overrides: any ``Settings`` field, e.g. ``api_key="..."``, ``batching=False``, ``max_body_bytes=1000``.

    Raises:
        tsfm.checkpoint.CheckpointError: the model name or folder is not a readable checkpoint.
    """
    loaded = model is not None and not isinstance(model, (str, os.PathLike))
    if model is not None and not loaded:
        overrides["model"] = str(model)
    settings = Settings(**{**settings.model_dump(), **overrides}) if settings is not None else Settings(**overrides)
    served = ServedModel(model if loaded else settings.model, device=settings.device)  # type: ignore[arg-type]
    service = Service(settings, served, Metrics())
    service.metrics.model_ready.labels(served.name).set(0)
    service.stream_store = streams.StreamStore(
        idle_s=settings.stream_idle_s,
        max_streams=settings.max_streams,
        max_stream_bytes=settings.max_stream_bytes,
        directory=settings.stream_dir,
        on_expired=lambda count: _observe_streams(service, "expired", count),
    )

    app = FastAPI(
        title="tsfm forecasting service",
        version=__version__,
        description=API_DESCRIPTION,
        lifespan=_lifespan(service),
        docs_url=None,  # replaced by add_offline_docs: FastAPI's pages load their scripts from a CDN
        redoc_url=None,
    )
    app.state.service = service
    app.add_exception_handler(RequestValidationError, _validation_error_handler)
    known_paths: set[str] = set()
    _add_middleware(app, service, known_paths)
    auth = [Depends(api_key_dependency(settings.api_key.get_secret_value()))] if settings.api_key else []
    _add_forecast_route(app, service, auth)
    _add_stream_routes(app, service, auth)
    _add_info_routes(app, service, auth)
    add_offline_docs(app)
    _add_page(app)
    _document_request_body(app, service)
    known_paths.update(getattr(route, "path", "") for route in app.routes)
    return app


# ----------------------------------------------------------------------------------------------------------------
# Lifecycle and middleware


def _lifespan(service: Service) -> Any:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        import torch

        threads_before = torch.get_num_threads()
        service.executor = ThreadPoolExecutor(1, thread_name_prefix="tsfm-model")
        # one thread: requests are parsed one at a time, so at most one large body is expanded into objects at once
        service.parser = ThreadPoolExecutor(1, thread_name_prefix="tsfm-parse")
        # set on the model thread itself: OpenMP keeps the thread count per thread as well as globally
        threads = service.settings.resolved_torch_threads()
        await asyncio.get_running_loop().run_in_executor(service.executor, torch.set_num_threads, threads)
        if service.settings.load_in_background:
            service.loader = asyncio.get_running_loop().create_task(_load(service), name="tsfm-load-model")
        else:
            await _load(service)
            if not service.served.ready:
                raise RuntimeError(f"model {service.served.name} failed to load: {service.served.error}")
        try:
            yield
        finally:
            if service.loader is not None:
                service.loader.cancel()
            if service.sweeper is not None:
                service.sweeper.cancel()
            if service.batcher is not None:
                await service.batcher.close()
            service.executor.shutdown(wait=False, cancel_futures=True)
            service.parser.shutdown(wait=False, cancel_futures=True)
            if service.helper is not None:
                service.helper.shutdown(wait=False, cancel_futures=True)
                service.helper = None
            service.loader = service.batcher = service.executor = service.parser = None  # may start again (tests)
            service.sweeper = None
            torch.set_num_threads(threads_before)  # torch's setting is process-wide: leave it as found
            service.metrics.model_ready.labels(service.served.name).set(0)

    return lifespan


async def _load(service: Service) -> None:
    """Load and warm up on the model thread, then start the batcher; failures show on ``/ready``."""
    served, settings, executor = service.served, service.settings, service.executor
    assert executor is not None, "the model thread starts with the app"
    await asyncio.get_running_loop().run_in_executor(executor, lambda: served.load(warmup=settings.warmup))
    if not served.ready:
        log.error("model %s failed to load: %s", served.name, served.error)
        return
    assert served.model is not None
    if not await _load_streams(service):
        return
    batcher = MicroBatcher(
        served.model,
        enabled=settings.batching,
        window_s=settings.batch_window_ms / 1000.0,
        max_batch_series=settings.max_batch_series,
        interactive_weight=settings.interactive_weight,
        steps_per_pass=served.steps_per_pass,
        max_queued_series=settings.max_queued_series,
        on_batch=service.metrics.observe_batch,
        executor=executor,
    )
    batcher.start()
    service.batcher = batcher
    if settings.helper_process and settings.load_in_background:  # a served app: start the helper before it is needed
        await asyncio.get_running_loop().run_in_executor(_helper(service), parsing.warm_up)
    service.metrics.model_ready.labels(served.name).set(1)
    log.info("model %s ready in %.2f s", served.name, served.load_seconds or 0.0)


def _add_middleware(app: FastAPI, service: Service, known_paths: set[str]) -> None:
    """Outermost first when read bottom-up: metrics sees every answer (CORS refusals, 401, 408, 413 included); the
    key is checked before the body is read; the body is read (with its limits) before the app parses it."""
    settings = service.settings
    app.add_middleware(
        BodyLimitMiddleware,
        max_body_bytes=settings.max_body_bytes,
        body_timeout_s=settings.body_timeout_s,
        max_buffered_body_bytes=settings.max_buffered_body_bytes,
    )
    if settings.api_key is not None:
        app.add_middleware(ApiKeyMiddleware, api_key=settings.api_key.get_secret_value())
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(MetricsMiddleware, metrics=service.metrics, known_paths=known_paths)


# ----------------------------------------------------------------------------------------------------------------
# POST /v1/forecast


def _body_route_errors(auth: list[Any], unavailable: str) -> dict[int | str, dict[str, Any]]:
    """The error answers (OpenAPI ``responses``) every route that reads a JSON body shares; ``unavailable`` says
    when that route answers 503."""
    errors: dict[int | str, dict[str, Any]] = {
        408: {"model": ErrorDetail, "description": "the body did not arrive within body_timeout_s"},
        413: {"model": ErrorDetail, "description": "the body is larger than max_body_bytes"},
        422: {"model": ValidationErrorBody, "description": "the request is not valid; `detail[].loc` names the field"},
        503: {"model": ErrorDetail, "description": unavailable},
    }
    if auth:
        errors[401] = {"model": ErrorDetail, "description": "missing or wrong API key"}
    return errors


def _add_forecast_route(app: FastAPI, service: Service, auth: list[Any]) -> None:
    settings, served = service.settings, service.served
    service.spec = parsing.RequestSpec(
        model_names=(served.name,),
        context_length=served.config.context_length,
        max_series_per_request=settings.max_series_per_request,
        max_points_per_series=settings.max_points_per_series,
        max_prediction_length=settings.max_prediction_length,
        max_quantile_levels=settings.max_quantile_levels,
        max_forecast_values=settings.max_forecast_values,
        max_item_id_length=settings.max_item_id_length,
        max_calendar_timestamps=settings.max_calendar_timestamps,
    )
    errors = _body_route_errors(auth, "the model is loading (see /ready), the queue is full, or the service is "
                                "shutting down; retry after `Retry-After` seconds")
    errors[504] = {"model": ErrorDetail, "description": "the forecast took longer than request_timeout_s"}
    body_doc = {"required": True, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/ForecastRequest"}, "examples": REQUEST_EXAMPLES}}}

    @app.post(
        "/v1/forecast",
        response_model=ForecastResponse,
        response_model_exclude_none=True,
        dependencies=auth,
        responses=errors,
        tags=["forecast"],
        summary="Forecast one or many series",
        operation_id="forecast",
        openapi_extra={"requestBody": body_doc},
    )
    async def forecast(request: Request) -> Response:
        """Zero-shot quantile forecasts for every series in `inputs`, in input order.

        Each prediction has the `median`, one array per requested quantile level keyed by the level (`"0.1"`), and
        `timestamps` when the series gives `start` and `freq`. Only the last `context_length` values of a series
        are read (see `/v1/models`).
        """
        batcher = _ready_batcher(service)
        body = await request.body()  # already read, within its limits, by BodyLimitMiddleware
        try:
            return await _unless_disconnected(
                request, asyncio.wait_for(_answer(service, batcher, body), settings.request_timeout_s)
            )
        except asyncio.TimeoutError:
            raise HTTPException(
                status.HTTP_504_GATEWAY_TIMEOUT,
                f"the forecast did not finish within {settings.request_timeout_s:g} s (request_timeout_s)",
            ) from None
        except QueueFull as err:
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(err), headers={"Retry-After": "1"}) from None
        except ForecastInputError as err:  # the schema should have caught it; still the client's input
            raise _validation_error(("body", "inputs"), str(err), None) from None
        except BatcherClosed:
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE, "the service is shutting down", headers={"Retry-After": "1"}
            ) from None


async def _unless_disconnected(request: Request, work: Any) -> Response:
    """``await work``, cancelled if the client goes away first: nobody would read the answer, and its model calls
    would delay everyone else's. Answers 499 (nginx's "client closed request"), which no client sees, for the logs
    and metrics."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
    if task.cancelled():
        return Response(status_code=499)
    return task.result()


async def _disconnected(request: Request) -> None:
    """Return once the client disconnects (the body was read already, so ``receive`` only waits for that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _answer(service: Service, batcher: MicroBatcher, body: bytes) -> Response:
    """Parse and validate, forecast, write the answer: the CPU work off the event loop, which only waits."""
    settings = service.settings
    prepared: parsing.Prepared = await _off_loop(
        service, len(body) > settings.inline_parse_bytes, parsing.prepare, service.spec, body
    )
    del body
    horizon, levels = prepared.prediction_length, prepared.levels
    notes = _warnings(service.served, horizon, levels, prepared.arrays)
    result = await batcher.submit(prepared.arrays, horizon, levels, prepared.infer_nonnegative, prepared.naive_blend,
                                  prepared.flip_equivariant)
    values = result.median.size * (len(levels) + 1)
    content = await _off_loop(
        service, values * 8 > settings.inline_parse_bytes, parsing.render, service.spec, prepared.item_ids,
        prepared.axes, levels, prepared.model or service.served.name, notes, result.quantiles, result.median,
    )
    return Response(content, media_type="application/json")


async def _off_loop(service: Service, large: bool, function: Any, *args: Any) -> Any:
    """``function(*args)`` on the parse thread, or for large bodies and answers in the helper process: their parse
    or write holds the GIL for as long as it takes, which on any thread of this process would stall the event loop.
    ``InvalidRequest`` becomes FastAPI's 422."""
    loop = asyncio.get_running_loop()
    executor: Executor | None = _helper(service) if large and service.settings.helper_process else service.parser
    assert executor is not None, "the parse thread starts with the app"
    try:
        return await loop.run_in_executor(executor, function, *args)
    except parsing.InvalidRequest as err:
        raise RequestValidationError(err.errors) from None
    except BrokenProcessPool:  # the helper died (out of memory?): start a new one for the next request
        service.helper = None
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "the parsing helper process failed; retry shortly",
                            headers={"Retry-After": "1"}) from None


def _helper(service: Service) -> Executor:
    """The helper process for large bodies, started on first use (``spawn``: a fork would copy the model and
    torch's threads; the helper imports only pydantic, pandas and the schemas), which exits when the server does
    (:mod:`tsfm.serving.helper_process`)."""
    if service.helper is None:
        service.helper = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=exit_with_parent)
    return service.helper


def _ready_batcher(service: Service) -> MicroBatcher:
    if service.batcher is not None:
        return service.batcher
    detail = "the model is still loading; retry shortly (GET /ready says when)"
    if service.served.state == "failed":
        detail = f"the model failed to load: {service.served.public_error}"
    raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail, headers={"Retry-After": "1"})


def _document_request_body(app: FastAPI, service: Service) -> None:
    """Put the request's JSON Schema into the OpenAPI components: the route reads its body itself (off the event
    loop), so FastAPI does not see the model."""
    make_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = make_openapi()
            assert service.spec is not None
            schema = service.spec.request_class().model_json_schema(ref_template="#/components/schemas/{model}")
            components = spec.setdefault("components", {}).setdefault("schemas", {})
            components.update(schema.pop("$defs", {}))
            components["ForecastRequest"] = schema
            stream_schemas = service.spec.stream_schemas()
            for name, request_class in (("StreamOpenRequest", stream_schemas.open),
                                        ("StreamUpdateRequest", stream_schemas.update),
                                        ("StreamForecastRequest", stream_schemas.forecast)):
                schema = request_class.model_json_schema(ref_template="#/components/schemas/{model}")
                components.update(schema.pop("$defs", {}))
                components[name] = schema
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _warnings(served: ServedModel, horizon: int, levels: Sequence[float], arrays: Sequence[np.ndarray]) -> list[str]:
    """The caveats ``tsfm.predict`` would warn about, said per request."""
    notes = []
    if horizon > served.trained_horizon:
        notes.append(
            f"prediction_length={horizon} is past the {served.trained_horizon} steps the model was trained to "
            "forecast; the later steps are extrapolated and less reliable"
        )
    model_levels = served.config.quantile_levels
    outside = [q for q in levels if q < model_levels[0] or q > model_levels[-1]]
    if outside:
        notes.append(
            f"quantile levels {outside} lie outside the levels the model predicts ({model_levels[0]}-"
            f"{model_levels[-1]}); they take its outermost quantiles, which understates the tails"
        )
    context = served.config.context_length
    if any(len(a) > context for a in arrays):
        notes.append(f"only the last {context} values of each series are used (the model's context_length)")
    return notes


async def _validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 body, kept short (``tsfm.serving.parsing.short_errors``: at most 20 errors, each echoing a short
    preview of the bad input) and JSON-safe (Infinity and NaN in an echoed input are sent as strings)."""
    assert isinstance(exc, RequestValidationError)
    detail = parsing.short_errors(exc.errors())
    return AsciiJSONResponse(status_code=status.HTTP_422_UNPROCESSABLE_CONTENT, content={"detail": detail})


class AsciiJSONResponse(JSONResponse):
    """``\\u`` escapes for everything outside ASCII: an echoed input may hold an unpaired surrogate, which
    cannot be encoded as UTF-8 but is valid JSON as an escape."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _validation_error(
    loc: tuple[int | str, ...], message: str, value: Any, *, kind: str = "value_error"
) -> RequestValidationError:
    """The same 422 body FastAPI gives for schema errors, for checks that need more than one field."""
    return RequestValidationError([{"type": kind, "loc": loc, "msg": message, "input": value}])


# ----------------------------------------------------------------------------------------------------------------
# Streams: /v1/streams (tsfm.serving.streams keeps them; the model work runs on the model thread)


StreamId = Annotated[str, PathParam(pattern=streams.STREAM_ID_PATTERN,
                                    description="the id POST /v1/streams answered (32 URL-safe characters)")]


async def _load_streams(service: Service) -> bool:
    """At start-up, once the model is loaded: the size of a stream series, and the snapshots of ``stream_dir``
    (before ``/ready`` says 200, so nothing acknowledged before a restart is missing after it)."""
    from tsfm.model import Forecaster

    served, store, executor = service.served, service.stream_store, service.executor
    assert store is not None and executor is not None and served.model is not None
    if not isinstance(served.model, Forecaster):  # another forecaster (tests' stand-ins) has no state to carry
        log.info("streams are off: the served model is not a tsfm Forecaster")
        return True
    loop = asyncio.get_running_loop()
    try:
        service.stream_bytes_per_series = await loop.run_in_executor(
            executor, store.bytes_per_series, served.model, served.config.context_length
        )
        loaded = await loop.run_in_executor(executor, store.load_snapshots, served.model, served.name)
    except Exception as err:  # an unreadable stream_dir: the service would lose acknowledged updates, so not ready
        served.state, served.error = "failed", f"stream snapshots: {type(err).__name__}: {err}"
        served.public_error = f"{type(err).__name__} reading the stream snapshots (the server log has the details)"
        log.error("stream snapshots of %s could not be loaded: %s", store.directory, served.error)
        return False
    if loaded:
        log.info("%d streams reloaded from %s", loaded, store.directory)
    _observe_streams(service, "opened", 0)
    service.sweeper = loop.create_task(_sweep_streams(service), name="tsfm-stream-sweeper")
    return True


async def _sweep_streams(service: Service) -> None:
    """Forever: remove the streams idle for longer than ``stream_idle_s`` (requests also expire them lazily)."""
    store = service.stream_store
    assert store is not None
    interval = min(60.0, max(0.05, store.idle_s / 4))
    while True:
        await asyncio.sleep(interval)
        try:
            store.sweep()
        except Exception:  # a failing delete must not stop the sweeps
            log.exception("stream sweep failed")


def _observe_streams(service: Service, event: str, count: int = 1) -> None:
    store = service.stream_store
    if store is not None:
        service.metrics.observe_stream(event, len(store.entries), store.total_bytes, count)


def _ready_streams(service: Service) -> streams.StreamStore:
    _ready_batcher(service)  # 503 while the model (and the snapshots) load
    if service.settings.max_streams == 0:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            "streams are turned off on this server (max_streams=0)")
    if not service.stream_bytes_per_series:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            "streams are not available: the served model is not a tsfm Forecaster")
    assert service.stream_store is not None
    return service.stream_store


def _stream_entry(store: streams.StreamStore, stream_id: str) -> streams.StreamEntry:
    try:
        return store.get(stream_id)
    except streams.StreamNotFound as err:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(err)) from None


def _still_open(entry: streams.StreamEntry) -> None:
    """Called under the stream's lock: it may have been deleted while this request waited for the lock."""
    if entry.closed:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"stream {entry.stream_id!r} was deleted")


async def _on_model(service: Service, function: Any, *args: Any) -> Any:
    """``function(*args)`` on the model thread (the batcher's: one model, one thread)."""
    assert service.executor is not None, "the model thread starts with the app"
    return await asyncio.get_running_loop().run_in_executor(service.executor, function, *args)


async def _on_parser(service: Service, function: Any, *args: Any) -> Any:
    """``function(*args)`` on the parse thread; ``StreamInputError`` becomes FastAPI's 422."""
    assert service.parser is not None, "the parse thread starts with the app"
    try:
        return await asyncio.get_running_loop().run_in_executor(service.parser, function, *args)
    except streams.StreamInputError as err:
        raise RequestValidationError(err.errors) from None


def _add_stream_routes(app: FastAPI, service: Service, auth: list[Any]) -> None:
    settings, served = service.settings, service.served
    assert service.spec is not None, "the forecast route sets the app's request spec first"
    spec = service.spec
    common = _body_route_errors(auth, "the model is loading (see /ready), streams are turned off (max_streams=0), "
                                "or the service is shutting down")
    not_found = {404: {"model": ErrorDetail, "description": "no open stream has this id (deleted or expired)"}}

    # OpenAPI links: the id POST /v1/streams answers is what the other stream routes take (stateful tests follow them)
    stream_links = {201: {"description": "the stream is open", "links": {
        name: {"operationId": operation, "parameters": {"stream_id": "$response.body#/stream_id"},
               "description": f"{verb} the stream just opened"}
        for name, operation, verb in (("UpdateStream", "update_stream", "append observations to"),
                                      ("ForecastStream", "forecast_stream", "forecast"),
                                      ("DeleteStream", "delete_stream", "close"))
    }}}

    def body_doc(name: str) -> dict[str, Any]:
        return {"requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{name}"}}}}}

    def large(body: bytes) -> bool:
        return len(body) > settings.inline_parse_bytes

    @app.post(
        "/v1/streams",
        status_code=status.HTTP_201_CREATED,
        response_model=StreamOpened,
        dependencies=auth,
        responses={**common, **stream_links,
                   413: {"model": ErrorDetail, "description": "the body is larger than max_body_bytes, or the stream "
                         "alone is larger than max_stream_bytes"},
                   429: {"model": ErrorDetail, "description": "max_streams streams are open; retry after "
                         "`Retry-After` seconds"},
                   507: {"model": ErrorDetail, "description": "the open streams hold max_stream_bytes already"}},
        tags=["streams"],
        summary="Open a stream of series",
        operation_id="open_stream",
        openapi_extra=body_doc("StreamOpenRequest"),
    )
    async def open_stream(request: Request) -> Response:
        """Read the series (as `/v1/forecast` takes them) into a stream that carries the model's state: later
        observations cost only their own patches, and forecasts continue from everything streamed. The stream is
        removed after `expires_in_s` seconds without a request."""
        store = _ready_streams(service)
        body = await request.body()
        prepared: parsing.PreparedOpen = await _off_loop(service, large(body), parsing.prepare_stream_open, spec, body)
        del body
        try:
            entry = store.reserve(len(prepared.arrays), service.stream_bytes_per_series)
        except streams.StreamsFull as err:
            _observe_streams(service, "refused")
            retry = {"Retry-After": str(max(1, min(60, int(store.idle_s))))} if err.status != 413 else None
            raise HTTPException(err.status, str(err), headers=retry) from None
        async with entry.lock:
            try:
                ends, notes = await _on_parser(service, series_ends, prepared.axes)
                entry.model = prepared.model or served.name
                entry.item_ids, entry.freqs, entry.ends, entry.notes = (
                    prepared.item_ids, [axis.freq for axis in prepared.axes], ends, notes)
                try:
                    await _on_model(service, store.open_stream, served.model, entry, prepared.arrays,
                                    prepared.max_drift)
                except StreamError as err:  # the schema checks what the stream does; kept as the client's 422
                    raise _validation_error(("body", "inputs"), str(err), None) from None
                if store.directory is not None:
                    snapshot = await _on_model(service, entry.stream.state_dict)  # type: ignore[union-attr]
                    await _on_parser(service, store.write_snapshot, entry, snapshot, entry.ends)
            except BaseException:
                store.remove(entry)
                raise
            entry.last_used = store.clock()
        _observe_streams(service, "opened")
        context = served.config.context_length
        warnings = list(notes)
        if any(len(a) > context for a in prepared.arrays):
            warnings.append(f"only the last {context} values of each series are read (the model's context_length)")
        answer = StreamOpened(stream_id=entry.stream_id, series=entry.series, expires_in_s=store.expires_in(entry),
                              warnings=warnings)
        return JSONResponse(answer.model_dump(), status_code=status.HTTP_201_CREATED)

    @app.post(
        "/v1/streams/{stream_id}/observations",
        response_model=StreamUpdated,
        dependencies=auth,
        responses={**common, **not_found,
                   500: {"model": ErrorDetail, "description": "the update could not be saved to stream_dir; it was "
                         "not applied"}},
        tags=["streams"],
        summary="Append new observations to a stream",
        operation_id="update_stream",
        openapi_extra=body_doc("StreamUpdateRequest"),
    )
    async def update_stream(stream_id: StreamId, request: Request) -> StreamUpdated:
        """Append new values to every series of the stream (one list per series, empty lists allowed). Complete
        patches are read into the state; the rest is buffered. With `stream_dir` set, the update is on disk before
        this answers."""
        store = _ready_streams(service)
        entry = _stream_entry(store, stream_id)
        body = await request.body()
        prepared: parsing.PreparedUpdate = await _off_loop(
            service, large(body), parsing.prepare_stream_update, spec, body
        )
        del body
        if len(prepared.values) != entry.series:
            raise _validation_error(("body", "values"), f"values has {len(prepared.values)} series, the stream has "
                                    f"{entry.series}; give one list per series (empty for none)", None)
        async with entry.lock:
            _still_open(entry)
            steps = [len(v) for v in prepared.values]
            ends = await _on_parser(service, streams.advance_ends, entry, steps, prepared.timestamps)
            result: streams.UpdateResult = await _on_model(
                service, store.update, entry, prepared.values, store.directory is not None
            )
            if result.snapshot is not None:
                try:
                    await _on_parser(service, store.write_snapshot, entry, result.snapshot, ends)
                except Exception as err:
                    log.error("stream %s: snapshot not written, update undone: %s", entry.stream_id, err)
                    await _on_model(service, store.undo, entry, result.backup)
                    raise HTTPException(status.HTTP_500_INTERNAL_SERVER_ERROR,
                                        "the update could not be saved (stream_dir); it was not applied") from None
            entry.ends = ends
            entry.last_used = store.clock()
        _observe_streams(service, "updated")
        return StreamUpdated(stream_id=entry.stream_id, steps=result.steps, buffered=result.buffered,
                             patches_completed=result.patches_completed, reanchors=result.reanchors,
                             expires_in_s=store.expires_in(entry))

    @app.post(
        "/v1/streams/{stream_id}/forecast",
        response_model=ForecastResponse,
        response_model_exclude_none=True,
        dependencies=auth,
        responses={**common, **not_found,
                   504: {"model": ErrorDetail, "description": "the forecast took longer than request_timeout_s"}},
        tags=["streams"],
        summary="Forecast every series of a stream",
        operation_id="forecast_stream",
        openapi_extra=body_doc("StreamForecastRequest"),
    )
    async def forecast_stream(stream_id: StreamId, request: Request) -> Response:
        """Forecasts of every series from the carried state, in the format of `/v1/forecast` (timestamps continue
        from the last observation of series opened with `start` and `freq`). The state is not changed."""
        store = _ready_streams(service)
        entry = _stream_entry(store, stream_id)
        body = await request.body()
        prepared: parsing.PreparedStreamForecast = await _off_loop(
            service, large(body), parsing.prepare_stream_forecast, spec, body
        )
        horizon, levels = prepared.prediction_length, prepared.levels
        values = entry.series * horizon * (len(levels) + 1)
        if values > settings.max_forecast_values:
            raise _validation_error(
                ("body", "prediction_length"),
                f"the answer would hold {entry.series} series x {horizon} steps x {len(levels) + 1} arrays "
                f"(quantile levels + median) = {values} numbers, over the limit of {settings.max_forecast_values} "
                "(max_forecast_values); ask for fewer steps or levels", horizon)
        async with entry.lock:
            _still_open(entry)
            axes = entry.axes()
            try:
                check_calendar_cost(axes, horizon, settings.max_calendar_timestamps)
            except TimestampsTooCostly as err:
                raise _validation_error(("body", "prediction_length"), str(err), horizon) from None
            try:
                quantiles, median = await asyncio.wait_for(
                    _on_model(service, store.forecast, entry, horizon, levels, prepared.infer_nonnegative,
                              prepared.naive_blend),
                    settings.request_timeout_s,
                )
            except asyncio.TimeoutError:
                raise HTTPException(
                    status.HTTP_504_GATEWAY_TIMEOUT,
                    f"the forecast did not finish within {settings.request_timeout_s:g} s (request_timeout_s)",
                ) from None
            entry.last_used = store.clock()
        _observe_streams(service, "forecast")
        notes = [*_warnings(served, horizon, levels, []), *entry.notes]
        content = await _off_loop(
            service, median.size * (len(levels) + 1) * 8 > settings.inline_parse_bytes, parsing.render,
            service.spec, entry.item_ids, axes, levels, entry.model, notes, quantiles, median,
        )
        return Response(content, media_type="application/json")

    @app.delete(
        "/v1/streams/{stream_id}",
        status_code=status.HTTP_204_NO_CONTENT,
        response_class=Response,
        dependencies=auth,
        responses={**{k: v for k, v in common.items() if k != 413}, **not_found},
        tags=["streams"],
        summary="Close a stream",
        operation_id="delete_stream",
    )
    async def delete_stream(stream_id: StreamId) -> Response:
        """Remove the stream and its snapshot."""
        store = _ready_streams(service)
        entry = _stream_entry(store, stream_id)
        async with entry.lock:
            _still_open(entry)
            store.remove(entry)
        _observe_streams(service, "deleted")
        return Response(status_code=status.HTTP_204_NO_CONTENT)


# ----------------------------------------------------------------------------------------------------------------
# Models, probes, metrics


def _add_info_routes(app: FastAPI, service: Service, auth: list[Any]) -> None:
    served = service.served
    auth_errors = {401: {"model": ErrorDetail, "description": "missing or wrong API key"}} if auth else None
    # an OpenAPI link: what /v1/models lists is what /v1/forecast takes (stateful tests follow it)
    models_links = {200: {"links": {"ForecastWithListedModel": {
        "operationId": "forecast",
        "requestBody": {"parameters": {"model": "$response.body#/models/0/name"}},
        "description": "forecast with the model /v1/models lists first",
    }}}}

    @app.get(
        "/v1/models",
        response_model=ModelsResponse,
        dependencies=auth,
        responses={**models_links, **(auth_errors or {})},
        tags=["forecast"],
    )
    async def models() -> ModelsResponse:
        """The served model(s), what they read and predict, and the limits on a request."""
        config = served.config
        info = ModelInfo(
            name=served.name,
            default=True,
            ready=served.ready,
            backbone=config.backbone,
            parameters=served.num_parameters(),
            context_length=config.context_length,
            patch_size=config.patch_size,
            trained_horizon=served.trained_horizon,
            quantile_levels=list(config.quantile_levels),
            decoding=config.decoding,
            infer_nonnegative=config.infer_nonnegative,
            naive_blend=config.naive_blend,
            flip_equivariant=config.flip_equivariant,
        )
        return ModelsResponse(models=[info], limits=service.settings.public_limits())

    @app.get("/health", response_model=Health, tags=["probes"])
    async def health() -> Health:
        """Liveness: 200 while the process serves HTTP, whether or not the model is loaded."""
        return Health()

    @app.get(
        "/ready",
        response_model=Readiness,
        response_model_exclude_none=True,
        responses={503: {"model": Readiness, "description": "the model is loading or failed to load"}},
        tags=["probes"],
    )
    async def ready() -> Any:
        """Readiness: 200 once the model is loaded and warmed up; 503 before (or if loading failed)."""
        if served.ready and service.batcher is not None:
            return Readiness(status="ready")
        state = "failed" if served.state == "failed" else "loading"
        body = Readiness(status=state, detail=served.public_error).model_dump(exclude_none=True)
        return JSONResponse(body, status_code=status.HTTP_503_SERVICE_UNAVAILABLE)

    metrics_responses: dict[int | str, dict[str, Any]] = {
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "Prometheus"},
        **(auth_errors or {}),
    }

    @app.get("/metrics", response_class=Response, responses=metrics_responses, dependencies=auth, tags=["probes"])
    async def metrics() -> Response:
        """Prometheus text format: requests, latency, errors, batch sizes, inference time, readiness."""
        return Response(service.metrics.render(), media_type=service.metrics.content_type)


# ----------------------------------------------------------------------------------------------------------------
# The page


def _add_page(app: FastAPI) -> None:
    """``/`` serves the page; its script and style come from ``/page/`` (all local files, no CDN)."""
    index = (PAGE_DIR / "index.html").read_text()

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(index)

    app.mount("/page", StaticFiles(directory=PAGE_DIR), name="page")
