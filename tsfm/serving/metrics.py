"""Prometheus metrics of one app: requests, latency, errors, batch sizes, inference time, model readiness.

Each app gets its own ``CollectorRegistry`` (not the process-global one) so several apps in one process (tests)
do not collide, and ``/metrics`` shows only this service. Every label takes its value from a fixed set, so no
client can grow the label space (and the /metrics answer) by sending made-up values: the method is one of the
standard methods or ``other``, the route is a route of the app (``/v1/forecast``) or ``unmatched``, never the
raw path, and the status is a number the server itself chose. This module records; it does not decide status codes
or touch requests.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tsfm.serving.batching import BatchStats

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
UNMATCHED_ROUTE = "unmatched"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
OTHER_METHOD = "other"
STREAM_EVENTS = ("opened", "updated", "forecast", "deleted", "expired", "refused")
"""The ``event`` label of ``tsfm_stream_events_total``: a fixed set, whatever clients send."""


class Metrics:
    """The instruments; ``render()`` is the ``/metrics`` body."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "tsfm_http_requests", "HTTP requests answered", ["method", "route", "status"], registry=r
        )
        self.latency = Histogram(
            "tsfm_http_request_duration_seconds", "time to answer a request", ["method", "route"],
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.errors = Counter(
            "tsfm_http_errors", "responses with status >= 400", ["route", "status"], registry=r
        )
        self.in_flight = Gauge("tsfm_http_requests_in_flight", "requests being answered", registry=r)
        self.batch_series = Histogram(
            "tsfm_batch_series", "series per model call", buckets=SIZE_BUCKETS, registry=r
        )
        self.batch_requests = Histogram(
            "tsfm_batch_requests", "requests merged into one model call", buckets=SIZE_BUCKETS, registry=r
        )
        self.inference = Histogram(
            "tsfm_inference_duration_seconds", "time of one model call", buckets=LATENCY_BUCKETS, registry=r
        )
        self.series = Counter("tsfm_forecast_series", "series forecast", registry=r)
        self.model_ready = Gauge("tsfm_model_ready", "1 when the model is loaded and warmed up", ["model"], registry=r)
        self.streams_open = Gauge("tsfm_streams_open", "open streams", registry=r)
        self.stream_bytes = Gauge(
            "tsfm_stream_bytes", "memory counted against max_stream_bytes: state tensors + kept tails", registry=r
        )
        self.stream_events = Counter(
            "tsfm_stream_events", "stream lifecycle events (opened, updated, forecast, deleted, expired, refused)",
            ["event"], registry=r,
        )
        for event in STREAM_EVENTS:  # every series present from the start, at 0
            self.stream_events.labels(event)

    def observe_stream(self, event: str, open_streams: int, total_bytes: int, count: int = 1) -> None:
        if event not in STREAM_EVENTS:
            raise ValueError(f"unknown stream event {event!r}")
        if count:
            self.stream_events.labels(event).inc(count)
        self.streams_open.set(open_streams)
        self.stream_bytes.set(total_bytes)

    def observe_batch(self, stats: BatchStats) -> None:
        self.batch_series.observe(stats.series)
        self.batch_requests.observe(stats.requests)
        self.inference.observe(stats.seconds)
        self.series.inc(stats.series)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)
        if status >= 400:
            self.errors.labels(route, str(status)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Pure ASGI middleware timing every HTTP request and counting it by route template and status.

    Pure ASGI rather than ``BaseHTTPMiddleware``: it adds no task per request and sees the status of streamed and
    failed responses alike (an exception counts as 500 and is re-raised for the server to log).
    """

    def __init__(self, app: Any, metrics: Metrics, known_paths: frozenset[str] | set[str] = frozenset()) -> None:
        self.app = app
        self.metrics = metrics
        self.known_paths = known_paths  # routes answered before routing (a 401 or 413 from middleware)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def record_status(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, record_status)
        finally:
            self.metrics.in_flight.dec()
            method = scope["method"] if scope["method"] in METHODS else OTHER_METHOD
            template = getattr(scope.get("route"), "path", None)
            if template is None:
                template = scope["path"] if scope["path"] in self.known_paths else UNMATCHED_ROUTE
            self.metrics.observe_request(method, template, status, time.perf_counter() - started)
