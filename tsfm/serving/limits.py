"""Limits on request bodies, before the app parses anything: size (413), read deadline (408), bytes held (503).

FastAPI would read the whole body before validation, so an oversized or slowly sent body would cost memory, a
connection and time first and be refused later (if at all). This pure ASGI middleware:

- refuses a body whose declared ``Content-Length`` is over ``max_body_bytes`` at once, and counts the bytes of a
  body without one (chunked) as they arrive, stopping at the limit (413);
- gives the client ``body_timeout_s`` from the start of the request to send the whole body (408 and the connection
  closed beyond), so a half-sent body cannot hold a connection and its buffer open;
- keeps the bytes buffered by all requests in progress under ``max_buffered_body_bytes`` (503 with ``Retry-After``
  beyond), so many concurrent large bodies cannot take the memory: the ones that fit go on, the others retry.

A body within the limits is buffered and replayed to the app unchanged. The other limits (series, points, horizon,
answer size) are validation and live in ``tsfm.serving.schemas``; the request timeout is in ``tsfm.serving.app``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any


class BodyLimitMiddleware:
    """Answer 413, 408 or 503 (``{"detail": ...}``) to a body that is too large, too slow or does not fit now."""

    def __init__(
        self, app: Any, max_body_bytes: int, body_timeout_s: float = 10.0, max_buffered_body_bytes: int | None = None
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.max_buffered = max_buffered_body_bytes or 4 * max_body_bytes
        self.buffered = 0  # bytes held by requests in progress (one event loop: no lock needed)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await _refuse(send, 413, f"request body is larger than the limit of {self.max_body_bytes} bytes "
                          "(TSFM_MAX_BODY_BYTES)")
            return
        deadline = time.monotonic() + self.body_timeout_s
        chunks: list[bytes] = []
        held = 0
        try:
            while True:
                try:
                    message = await asyncio.wait_for(receive(), max(deadline - time.monotonic(), 0.0))
                except asyncio.TimeoutError:
                    await _refuse(send, 408, f"the request body did not arrive within {self.body_timeout_s:g} s "
                                  "(TSFM_BODY_TIMEOUT_S)")
                    return
                if message["type"] != "http.request":  # the client went away: let the app see it
                    await self.app(scope, _replay([message], receive), send)
                    return
                body = message.get("body", b"")
                if held + len(body) > self.max_body_bytes:
                    await _refuse(send, 413, f"request body is larger than the limit of {self.max_body_bytes} "
                                  "bytes (TSFM_MAX_BODY_BYTES)")
                    return
                if self.buffered + len(body) > self.max_buffered:
                    await _refuse(send, 503, "the service holds as many request bodies as it may "
                                  "(TSFM_MAX_BUFFERED_BODY_BYTES); retry shortly", retry_after=True)
                    return
                self.buffered += len(body)
                held += len(body)
                chunks.append(body)
                if not message.get("more_body", False):
                    break
            whole = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            chunks.clear()
            await self.app(scope, _replay([whole], receive), send)
        finally:
            self.buffered -= held


async def _refuse(send: Any, status: int, detail: str, *, retry_after: bool = False) -> None:
    """Answer and close the connection: the rest of the body, if any, is not worth reading."""
    payload = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
               (b"connection", b"close")]
    if retry_after:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def _content_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP server rejects malformed lengths itself
    return None


def _replay(messages: list[dict[str, Any]], receive: Any) -> Any:
    """A ``receive`` that first returns ``messages``, then defers to the real one (for disconnects)."""
    queued = list(messages)

    async def replayed() -> dict[str, Any]:
        if queued:
            return queued.pop(0)
        return await receive()

    return replayed
