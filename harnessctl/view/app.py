"""The viewer's Starlette application: GET routes only (anything else is 405), JSON from
:mod:`.data`, one static page, and headers that keep the page to its own script
(``Content-Security-Policy``) and its responses to their declared types."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from ..errors import ConfigError, HarnessctlError
from . import data

STATIC = Path(__file__).parent / "static"
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def create_app(store: Any, workspace: Any = None) -> Starlette:
    """The viewer over ``store`` (a ``harnessctl.store.Store``); ``workspace``, when given,
    supplies the suite splits a comparison pairs on (``runs.split_task_ids``)."""

    def api(fn):
        async def endpoint(request: Request) -> Response:
            try:
                body = fn(request)
            except ConfigError as exc:  # a bad filter
                return JSONResponse({"error": str(exc)}, status_code=400, headers=HEADERS)
            except HarnessctlError as exc:  # no such run or rollout
                return JSONResponse({"error": str(exc)}, status_code=404, headers=HEADERS)
            return JSONResponse(body, headers=HEADERS)

        return endpoint

    def static(name: str, media: str):
        async def endpoint(request: Request) -> Response:
            return FileResponse(STATIC / name, media_type=media, headers=HEADERS)

        return endpoint

    routes = [
        Route("/", static("index.html", "text/html; charset=utf-8")),
        Route("/static/viewer.js", static("viewer.js", "text/javascript; charset=utf-8")),
        Route("/static/viewer.css", static("viewer.css", "text/css; charset=utf-8")),
        Route("/api/runs", api(lambda r: data.runs(store))),
        Route("/api/rollouts", api(lambda r: data.rollouts(store, dict(r.query_params)))),
        Route(
            "/api/rollouts/{rollout_id}",
            api(lambda r: data.rollout(store, r.path_params["rollout_id"])),
        ),
        Route("/api/compare", api(lambda r: data.compare(store, workspace, dict(r.query_params)))),
        Route("/api/lineage", api(lambda r: data.lineage(store))),
        Route("/api/profiles", api(lambda r: data.profiles(store))),
    ]
    return Starlette(routes=routes)
