"""The optional API key: with ``TSFM_API_KEY`` set, ``/v1/*`` and ``/metrics`` need ``Authorization: Bearer <key>``.

Checked twice, for two reasons. ``ApiKeyMiddleware`` checks it first, before the body is read or parsed, so a
client without the key gets 401 at once and cannot make the service read, hold or parse anything (a dependency runs
only after FastAPI has parsed the body). The FastAPI dependency checks it again, which is cheap, and shows the
bearer scheme in the OpenAPI schema (the "Authorize" button of ``/docs``).

What needs the key: the forecasts and model listing (``/v1/*``) and ``/metrics`` (it tells traffic and error rates;
Prometheus sends a bearer token with ``authorization: {credentials: ...}``). What stays open: the probes
(``/health``, ``/ready``, which orchestrators call without secrets and which say no more than up/ready), the API
documents and the page (static; the page asks its user for the key). The comparison is constant-time.

No ``from __future__ import annotations``: the dependency's signature names a local object, which FastAPI must
see as an object, not as a string to resolve.
"""

import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, HTTPException, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

UNAUTHORIZED_DETAIL = "missing or wrong API key: send the header 'Authorization: Bearer <key>'"
PROTECTED_PREFIXES = ("/v1/", "/metrics")


def is_protected(path: str) -> bool:
    return path.startswith(PROTECTED_PREFIXES[0]) or path == PROTECTED_PREFIXES[1]


class ApiKeyMiddleware:
    """Pure ASGI: 401 for a protected path without the right bearer token, before anything reads the body.

    ``OPTIONS`` passes (a browser's CORS preflight never carries credentials; no route does work for it).
    """

    def __init__(self, app: Any, api_key: str) -> None:
        self.app = app
        self.expected = api_key.encode("ascii")  # Settings refuses keys outside visible ASCII

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] == "OPTIONS" or not is_protected(_app_path(scope)):
            await self.app(scope, receive, send)
            return
        if hmac.compare_digest(_bearer_token(scope), self.expected):
            await self.app(scope, receive, send)
            return
        payload = json.dumps({"detail": UNAUTHORIZED_DETAIL}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                   (b"www-authenticate", b"Bearer"), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _app_path(scope: dict[str, Any]) -> str:
    path, root = scope["path"], scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def _bearer_token(scope: dict[str, Any]) -> bytes:
    """The token of ``Authorization: Bearer <token>`` (scheme case-insensitive, as HTTPBearer reads it), else b""."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else b""
    return b""


def api_key_dependency(api_key: str) -> Callable[..., Awaitable[None]]:
    """A dependency that raises 401 unless the request carries ``api_key`` as its bearer token."""
    bearer = HTTPBearer(auto_error=False, description="the service's API key (TSFM_API_KEY)")
    expected = api_key.encode("ascii")

    async def require_api_key(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
        given = b"" if credentials is None else credentials.credentials.encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, expected):
            raise HTTPException(
                status_code=status.HTTP_401_UNAUTHORIZED,
                detail=UNAUTHORIZED_DETAIL,
                headers={"WWW-Authenticate": "Bearer"},
            )

    return require_api_key
