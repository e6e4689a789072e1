"""HTTP/1.1 over a unix socket (or loopback TCP) for the gateway: binding and request routing.

Kept apart from :mod:`.server` so the gateway logic (auth, budgets, ledger) reads without the
socket plumbing. Nothing here prints: socketserver's stderr tracebacks go to a debug log.
"""

from __future__ import annotations

import json
import logging
import os
import socketserver
import tempfile
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from . import protocol

MAX_SOCKET_PATH = 107  # sun_path is 108 bytes on Linux, NUL included
MAX_BODY_BYTES = 32 * 1024 * 1024
Response = tuple[int, dict[str, Any]]
_log = logging.getLogger(__name__)


class _Quiet:
    # The default backlog of 5 refuses bursts: a full AF_UNIX backlog fails connect() at once
    # with EAGAIN for a client with a timeout, instead of waiting as TCP would.
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver would print a traceback (typically a sandbox that hung up mid-reply);
        # library code never prints, so it goes to the debug log instead.
        _log.debug("gateway connection failed", exc_info=True)


class UnixServer(_Quiet, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class TCPServer(_Quiet, socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def bind_unix(
    socket_dir: Path | None, handler: type[BaseHTTPRequestHandler]
) -> tuple[UnixServer, Path]:
    """Bind ``gw.sock`` in a fresh ``hxgw-*`` directory (0o711) under ``socket_dir`` or /tmp.

    /tmp rather than $TMPDIR keeps the path short (AF_UNIX limit). The socket is 0o666 because
    sandboxes run as another uid; the per-rollout bearer token is the access control.
    """
    parent = socket_dir or (Path("/tmp") if Path("/tmp").is_dir() else None)
    directory = Path(tempfile.mkdtemp(prefix="hxgw-", dir=parent)).resolve()
    path = directory / "gw.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        directory.rmdir()
        raise ValueError(f"socket path too long for AF_UNIX ({MAX_SOCKET_PATH} max): {path}")
    directory.chmod(0o711)  # others may reach the socket but not list the directory
    server = UnixServer(str(path), handler)
    path.chmod(0o666)
    return server, path


def make_handler(
    authorize: Callable[[str | None], Any | None],
    chat: Callable[[Any, bytes], Response],
    models: Callable[[Any], dict[str, Any]],
    posts: dict[str, Callable[[Any, bytes], Response]] | None = None,
) -> type[BaseHTTPRequestHandler]:
    """Route ``POST /v1/chat/completions``, ``GET /v1/models`` and the extra ``posts`` routes
    (the environment's reset and step); all need a known token.

    ``authorize`` maps the Authorization header to a rollout (or None: 401); ``chat``,
    ``models`` and each of ``posts`` answer for that rollout.
    """
    extra = dict(posts or {})

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 600  # a silent client must not hold a thread forever

        def address_string(self) -> str:
            return "sandbox"  # AF_UNIX peers have no address

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # the gateway never prints; the ledger is the record

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _not_found(self) -> None:
            self._send(404, protocol.error_body("not_found", "not_found", f"no route {self.path}"))

        def _rollout(self) -> Any | None:
            rollout = authorize(self.headers.get("Authorization"))
            if rollout is None:
                msg = "unknown or revoked token"
                self._send(401, protocol.error_body("authentication_error", "invalid_token", msg))
            return rollout

        def do_GET(self) -> None:
            if self.path.rstrip("/") != "/v1/models":
                self._not_found()
            elif (rollout := self._rollout()) is not None:
                self._send(200, models(rollout))

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                self.close_connection = True  # the unread body would corrupt the next request
                msg = f"Content-Length must be 0..{MAX_BODY_BYTES}"
                self._send(413, protocol.error_body("invalid_request_error", "bad_request", msg))
                return
            raw = self.rfile.read(length)
            path = self.path.rstrip("/")
            route = chat if path == "/v1/chat/completions" else extra.get(path)
            if route is None:
                self._not_found()
            elif (rollout := self._rollout()) is not None:
                self._send(*route(rollout, raw))

    return Handler
