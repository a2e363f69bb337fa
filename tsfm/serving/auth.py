"""The optional API key: with ``TSFM_API_KEY`` set, ``/v1/*`` needs ``Authorization: Bearer <key>`` (else 401).

A FastAPI dependency rather than middleware, so the OpenAPI schema shows the bearer scheme and ``/docs`` gets its
"Authorize" button. Probes (``/health``, ``/ready``), ``/metrics`` and the page stay open: orchestrators and
scrapers call those without secrets, and the page asks its user for the key. The comparison is constant-time.

No ``from __future__ import annotations``: the dependency's signature names a local object, which FastAPI must
see as an object, not as a string to resolve.
"""

import hmac
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, HTTPException, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

UNAUTHORIZED_DETAIL = "missing or wrong API key: send the header 'Authorization: Bearer <key>'"


def api_key_dependency(api_key: str) -> Callable[..., Awaitable[None]]:
    """A dependency that raises 401 unless the request carries ``api_key`` as its bearer token."""
    bearer = HTTPBearer(auto_error=False, description="the service's API key (TSFM_API_KEY)")
    expected = api_key.encode()

    async def require_api_key(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
        given = b"" if credentials is None else credentials.credentials.encode()
        if not hmac.compare_digest(given, expected):
            raise HTTPException(
                status_code=status.HTTP_401_UNAUTHORIZED,
                detail=UNAUTHORIZED_DETAIL,
                headers={"WWW-Authenticate": "Bearer"},
            )

    return require_api_key
