"""API documentation pages (Swagger UI at ``/docs``, ReDoc at ``/redoc``) served from local files, never a CDN.

FastAPI's default pages load Swagger UI and ReDoc from jsDelivr, so on a machine without internet (ours, and many
production networks) ``/docs`` is a blank page. The assets come from the ``fastapi-offline`` wheel instead (MIT;
Swagger UI 5, which renders the OpenAPI 3.1 schema FastAPI writes, and ReDoc): pinned like every other dependency,
read from its package folder, mounted under ``/docs-assets``. Asset URLs honour ``root_path``, so the pages also work
behind a reverse proxy that serves the app under a prefix. Swagger UI's validator badge is off (``validatorUrl:
null``): it would send the schema's URL to validator.swagger.io, an outside host.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs-assets"
SWAGGER_JS = "swagger-ui-bundle.js"
SWAGGER_CSS = "swagger-ui.css"
REDOC_JS = "redoc.standalone.js"
FAVICON = "favicon.png"


def assets_dir() -> Path:
    """The folder holding the Swagger UI and ReDoc bundles (inside the installed ``fastapi_offline`` package).

    Raises:
        RuntimeError: the package is missing or lacks a bundle (install the ``serve`` extra).
    """
    try:
        folder = Path(str(importlib.resources.files("fastapi_offline") / "static"))
    except ModuleNotFoundError as error:
        raise RuntimeError("the API docs need fastapi-offline: pip install 'tsfm[serve]'") from error
    missing = [name for name in (SWAGGER_JS, SWAGGER_CSS, REDOC_JS, FAVICON) if not (folder / name).is_file()]
    if missing:
        raise RuntimeError(f"fastapi-offline at {folder} lacks {', '.join(missing)}; reinstall the serve extra")
    return folder


def add_offline_docs(app: FastAPI) -> None:
    """Add ``/docs``, its OAuth2 redirect page and ``/redoc`` to an app built with ``docs_url=None, redoc_url=None``.

    Args:
        app: the service; its ``openapi_url`` and ``title`` are used.
    """
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")
    redirect_url = "/docs/oauth2-redirect"

    def prefixed(request: Request, path: str) -> str:
        return request.scope.get("root_path", "").rstrip("/") + path

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=prefixed(request, app.openapi_url or "/openapi.json"),
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=prefixed(request, redirect_url),
            swagger_js_url=prefixed(request, f"{ASSETS_URL}/{SWAGGER_JS}"),
            swagger_css_url=prefixed(request, f"{ASSETS_URL}/{SWAGGER_CSS}"),
            swagger_favicon_url=prefixed(request, f"{ASSETS_URL}/{FAVICON}"),
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get(redirect_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=prefixed(request, app.openapi_url or "/openapi.json"),
            title=f"{app.title} - ReDoc",
            redoc_js_url=prefixed(request, f"{ASSETS_URL}/{REDOC_JS}"),
            redoc_favicon_url=prefixed(request, f"{ASSETS_URL}/{FAVICON}"),
            with_google_fonts=False,
        )
