"""The viewer's Starlette application: GET routes only (anything else is 405), JSON from
:mod:`.data`, one static page, and headers that keep the page to its own script
(``Content-Security-Policy``) and its responses to their declared types.

Every request passes :class:`Guard` first. The store holds every prompt and reply, and a
page the user opens elsewhere can make the browser send requests to the viewer's port:

- **Host**: a request whose ``Host`` is not one of the viewer's names (loopback names, the
  address it listens on, ``--allow-host`` names) is refused, so a DNS-rebinding page (its
  own name resolved to 127.0.0.1) reads nothing;
- **cross-origin**: an ``Origin`` that is not the viewer's, or ``Sec-Fetch-Site:
  cross-site``, is refused;
- **a per-launch token**: ``harnessctl view`` prints a URL holding a random token; opening it
  sets a ``SameSite=Strict``, ``HttpOnly`` cookie and redirects to the same page without
  the token, and every request without that cookie (or the token itself) is refused.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from ..errors import ConfigError, HarnessctlError
from . import LOOPBACK, data

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


COOKIE = "harnessctl_view"


def host_name(value: str) -> str:
    """The host part of a ``Host`` header or URL netloc, lowercased: no port, no brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """ASGI middleware: refuse a foreign ``Host``, a cross-origin request, and (with a token)
    a request that does not carry the launch's token (module docstring)."""

    def __init__(self, app: Any, *, hosts: Iterable[str], token: str | None) -> None:
        self.app = app
        self.hosts = {h.lower() for h in hosts}
        self.token = token

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(headers)
        if refusal is not None:
            return await JSONResponse({"error": refusal}, 403, headers=HEADERS)(
                scope, receive, send
            )
        if self.token is None:
            return await self.app(scope, receive, send)
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        given = dict(query).get("token")
        if given is not None and hmac.compare_digest(given, self.token):
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            where = scope["path"] + (f"?{rest}" if rest else "")
            redirect = Response(status_code=303, headers={**HEADERS, "Location": where})
            redirect.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", path="/")
            return await redirect(scope, receive, send)
        cookie = Request(scope).cookies.get(COOKIE, "")
        if not hmac.compare_digest(cookie, self.token):
            return await JSONResponse(
                {"error": "open the URL `harnessctl view` printed (it holds this launch's token)"},
                401,
                headers=HEADERS,
            )(scope, receive, send)
        return await self.app(scope, receive, send)

    def _refusal(self, headers: dict[str, str]) -> str | None:
        host = host_name(headers.get("host", ""))
        if host not in self.hosts:
            return f"Host {host!r} is not this viewer's (use --allow-host to serve that name)"
        origin = headers.get("origin")
        if origin is not None and (origin == "null" or host_name(urlsplit(origin).netloc) != host):
            return "cross-origin request refused"
        if headers.get("sec-fetch-site") == "cross-site":
            return "cross-site request refused"
        return None


def create_app(
    store: Any,
    workspace: Any = None,
    *,
    token: str | None = None,
    hosts: Iterable[str] = LOOPBACK,
) -> Starlette:
    """The viewer over ``store`` (a ``harnessctl.store.Store``); ``workspace``, when given,
    supplies the suite splits a comparison pairs on (``runs.split_task_ids``). ``hosts``:
    the names a request's ``Host`` may give; ``token``: when set, the launch's token every
    request must carry (:class:`Guard`)."""

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
    guard = Middleware(Guard, hosts=hosts, token=token)
    return Starlette(routes=routes, middleware=[guard])
