"""The request body size limit: 413 before the app parses anything.

FastAPI reads and parses the whole JSON body before validation, so an oversized body would cost memory and CPU
first and be refused later (if at all). This pure ASGI middleware refuses a body whose declared
``Content-Length`` is over the limit at once, and counts the bytes of a body without one (chunked) as they
arrive, stopping at the limit; a body within the limit is buffered and replayed to the app unchanged. The other
limits (series, points, horizon) are validation and live in ``tsfm.serving.schemas``; the timeout is in
``tsfm.serving.app``.
"""

from __future__ import annotations

import json
from typing import Any


class BodySizeLimitMiddleware:
    """Answer ``413 {"detail": ...}`` to any HTTP request whose body exceeds ``max_body_bytes``."""

    def __init__(self, app: Any, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see it
                await self.app(scope, _replay([message], receive), send)
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_body_bytes:
                await self._refuse(send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        whole = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([whole], receive), send)

    async def _refuse(self, send: Any) -> None:
        detail = f"request body is larger than the limit of {self.max_body_bytes} bytes (TSFM_MAX_BODY_BYTES)"
        payload = json.dumps({"detail": detail}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                   (b"connection", b"close")]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
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
