"""HTTP/1.1 over a unix socket (or loopback TCP) for the gateway: binding and request routing.

Kept apart from :mod:`.server` so the gateway logic (auth, budgets, ledger) reads without the
socket plumbing. Nothing here prints: socketserver's stderr tracebacks go to a debug log.

What a hostile client can make the host hold is bounded (the values are in
:mod:`harnessctl.bounds`): the token is checked on the headers, before any body is read (an
unauthorized request never costs its body); a body is at most ``MAX_BODY_BYTES`` and all
bodies held at once (read and not yet answered) at most ``MAX_BODY_BYTES_IN_FLIGHT`` (503
past it); every socket read times out after ``SOCKET_TIMEOUT_S``, and, whatever the pace of
its bytes, a connection must send a request's headers within ``HEADER_DEADLINE_S`` and the
whole request within ``REQUEST_DEADLINE_S`` (a watchdog shuts it down past either); at most
``MAX_REQUESTS_PER_TOKEN`` connections of one token are past their headers at once (more get
429); at most ``MAX_CONNECTIONS`` connections are served at once: a new one past the cap
closes the oldest connection still sending its headers (or being drained after a refusal),
so slow clients cannot starve other rollouts; only when there is none is the new one closed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import socketserver
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from ..bounds import (
    HEADER_DEADLINE_S,
    MAX_BODY_BYTES,
    MAX_BODY_BYTES_IN_FLIGHT,
    MAX_CONNECTIONS,
    MAX_REQUESTS_PER_TOKEN,
    REQUEST_DEADLINE_S,
    SOCKET_TIMEOUT_S,
)
from ..runtime.wire import CHAT_PATH, MODELS_PATH
from . import protocol

__all__ = [
    "HEADER_DEADLINE_S",
    "MAX_BODY_BYTES",
    "MAX_BODY_BYTES_IN_FLIGHT",
    "MAX_CONNECTIONS",
    "MAX_REQUESTS_PER_TOKEN",
    "REQUEST_DEADLINE_S",
    "SOCKET_TIMEOUT_S",
    "TCPServer",
    "UnixServer",
    "bind_unix",
    "make_handler",
]

MAX_SOCKET_PATH = 107  # sun_path is 108 bytes on Linux, NUL included
DISCARD_BYTES = 1024 * 1024  # what is read (and dropped) of a request that is refused
SANDBOX_GID = 65534  # nogroup: the sandboxes' group when harnessctl runs as root
WATCH_EVERY_S = 0.25  # how often the watchdog looks for connections past their deadline
Response = tuple[int, dict[str, Any]]
_log = logging.getLogger(__name__)


@dataclass
class _Conn:
    """A served connection: what it is doing, since when, and until when it may."""

    sock: Any
    phase: str  # headers | body | draining | busy
    since: float
    deadline: float | None
    closing: bool = False

    @property
    def evictable(self) -> bool:
        return not self.closing and self.phase in ("headers", "draining")


class _Quiet:
    # The default backlog of 5 refuses bursts: a full AF_UNIX backlog fails connect() at once
    # with EAGAIN for a client with a timeout, instead of waiting as TCP would.
    request_queue_size = 256
    max_connections = MAX_CONNECTIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._active = 0
        self._active_lock = threading.Lock()
        self._body_bytes = 0  # bodies held now (read, not yet answered), all connections
        self._conns: dict[int, _Conn] = {}
        self._watch_stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        super().__init__(*args, **kwargs)

    def reserve_body(self, length: int) -> bool:
        with self._active_lock:
            if self._body_bytes + length > MAX_BODY_BYTES_IN_FLIGHT:
                return False
            self._body_bytes += length
            return True

    def release_body(self, length: int) -> None:
        with self._active_lock:
            self._body_bytes -= length

    def phase(self, sock: Any, phase: str, deadline: float | None) -> None:
        """Record what connection ``sock`` is doing now, and its deadline (None: none)."""
        with self._active_lock:
            conn = self._conns.get(id(sock))
            if conn is not None:
                conn.phase, conn.since, conn.deadline = phase, time.monotonic(), deadline

    def process_request(self, request: Any, client_address: Any) -> None:
        now = time.monotonic()
        with self._active_lock:
            closing = sum(1 for c in self._conns.values() if c.closing)
            full = self._active - closing >= self.max_connections
            if full:  # make room: the oldest connection still sending headers (or drained)
                victims = [c for c in self._conns.values() if c.evictable]
                if victims:
                    self._close(min(victims, key=lambda c: c.since))
                    full = False
            if not full:
                self._active += 1
                self._conns[id(request)] = _Conn(request, "headers", now, now + HEADER_DEADLINE_S)
        if full:  # past the cap: closed at once, no thread, nothing read
            self.shutdown_request(request)  # type: ignore[attr-defined]
            return
        self._start_watchdog()
        try:
            super().process_request(request, client_address)  # type: ignore[misc]
        except Exception:
            self._release(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)  # type: ignore[misc]
        finally:
            self._release(request)

    def _release(self, request: Any) -> None:
        with self._active_lock:
            self._active -= 1
            self._conns.pop(id(request), None)

    @staticmethod
    def _close(conn: _Conn) -> None:
        """Shut a connection down (its blocked read returns at once); caller holds the lock."""
        conn.closing = True
        with contextlib.suppress(OSError):
            conn.sock.shutdown(socket.SHUT_RDWR)

    def _start_watchdog(self) -> None:
        with self._active_lock:
            if self._watchdog is not None:
                return
            self._watchdog = threading.Thread(target=self._watch, name="hx-gw-watch", daemon=True)
        self._watchdog.start()

    def _watch(self) -> None:
        while not self._watch_stop.wait(WATCH_EVERY_S):
            now = time.monotonic()
            with self._active_lock:
                for conn in self._conns.values():
                    if not conn.closing and conn.deadline is not None and now > conn.deadline:
                        self._close(conn)

    def server_close(self) -> None:
        self._watch_stop.set()
        super().server_close()  # type: ignore[misc]

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
    """Bind ``gw.sock`` in a fresh ``hxgw-*`` directory under ``socket_dir`` or /tmp (one per
    run: each sandbox of the run is given this directory alone).

    /tmp rather than $TMPDIR keeps the path short (AF_UNIX limit). Run as root, the directory
    is ``root:nogroup`` 0o710 and the socket 0o660: only root and the sandboxes (uid and gid
    65534) can reach it, no other local user. Otherwise the sandboxes run as you (local) or as
    65534 (docker), so the directory is 0o711 and the socket 0o666. Either way the
    per-rollout bearer token is the access control within a run; the bubblewrap sandbox sees
    its own run's directory only.
    """
    from ..sandbox import OWNER_FILE, mark_owner

    parent = socket_dir or (Path("/tmp") if Path("/tmp").is_dir() else None)
    directory = Path(tempfile.mkdtemp(prefix="hxgw-", dir=parent)).resolve()
    path = directory / "gw.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        directory.rmdir()
        raise ValueError(f"socket path too long for AF_UNIX ({MAX_SOCKET_PATH} max): {path}")
    mark_owner(directory)  # a run killed with SIGKILL leaves it: the next run reaps it
    os.chmod(directory / OWNER_FILE, 0o600)
    as_root = os.geteuid() == 0
    if as_root:
        os.chown(directory, 0, SANDBOX_GID)
        directory.chmod(0o710)  # root and the sandboxes' group may reach the socket, no one lists
    else:
        directory.chmod(0o711)  # others may reach the socket but not list the directory
    server = UnixServer(str(path), handler)
    if as_root:
        os.chown(path, 0, SANDBOX_GID)
        path.chmod(0o660)
    else:
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
    busy: dict[int, int] = {}  # requests being handled, by rollout
    busy_lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = SOCKET_TIMEOUT_S  # a silent client must not hold a thread for long

        def handle_one_request(self) -> None:
            # the next request (idle keep-alive time included) must bring its headers within
            # HEADER_DEADLINE_S and its body within REQUEST_DEADLINE_S: the watchdog enforces
            self._started = time.monotonic()
            self._phase("headers", self._started + HEADER_DEADLINE_S)
            super().handle_one_request()

        def _phase(self, phase: str, deadline: float | None) -> None:
            self.server.phase(self.connection, phase, deadline)  # type: ignore[attr-defined]

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

        def _rollout(self, send: bool = True) -> Any | None:
            rollout = authorize(self.headers.get("Authorization"))
            if rollout is None and send:
                self._unauthorized()
            return rollout

        def _unauthorized(self) -> None:
            msg = "unknown or revoked token"
            self._send(401, protocol.error_body("authentication_error", "invalid_token", msg))

        def _discard_body(self) -> None:
            """Read and drop a small body (up to DISCARD_BYTES, 64 KiB at a time) so that the
            client gets the answer; a larger or unknown one is left unread and the connection
            closed after the answer."""
            self.close_connection = True
            self._phase("draining", self._started + REQUEST_DEADLINE_S)
            try:
                left = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                return
            if not 0 < left <= DISCARD_BYTES:
                return
            with contextlib.suppress(OSError):
                while left > 0 and (chunk := self.rfile.read(min(left, 65536))):
                    left -= len(chunk)

        def do_GET(self) -> None:
            if self.path.rstrip("/") != MODELS_PATH:
                self._not_found()
            elif (rollout := self._rollout()) is not None:
                with self._slot(rollout) as ok:
                    if ok:
                        self._phase("busy", None)
                        self._send(200, models(rollout))

        def do_POST(self) -> None:
            path = self.path.rstrip("/")
            route = chat if path == CHAT_PATH else extra.get(path)
            if route is None:
                self._discard_body()
                self._not_found()
                return
            rollout = self._rollout(send=False)  # on the headers: a wrong token's body is
            if rollout is None:  # never kept, only discarded (a little, so the client can
                self._discard_body()  # read its 401) or left unread on a closed connection
                self._unauthorized()
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                self.close_connection = True  # the unread body would corrupt the next request
                msg = f"Content-Length must be 0..{MAX_BODY_BYTES}"
                self._send(413, protocol.error_body("invalid_request_error", "bad_request", msg))
                return
            with self._slot(rollout) as ok:
                if not ok:
                    return
                server = self.server
                if not server.reserve_body(length):  # type: ignore[attr-defined]
                    self._discard_body()
                    msg = "the gateway holds too many request bodies at once; retry"
                    self._send(503, protocol.error_body("server_error", "overloaded", msg))
                    return
                try:  # the bytes stay reserved until the request is answered
                    self._phase("body", self._started + REQUEST_DEADLINE_S)
                    raw = self.rfile.read(length)
                    if len(raw) < length:  # the client hung up or timed out mid-body
                        self.close_connection = True
                        return
                    self._phase("busy", None)  # the model's time is not the client's
                    self._send(*route(rollout, raw))
                finally:
                    server.release_body(length)  # type: ignore[attr-defined]

        @contextlib.contextmanager
        def _slot(self, rollout: Any) -> Iterator[bool]:
            """At most MAX_REQUESTS_PER_TOKEN connections of one rollout past their headers at
            once (429 past it)."""
            key = id(rollout)
            with busy_lock:
                ok = busy.get(key, 0) < MAX_REQUESTS_PER_TOKEN
                if ok:
                    busy[key] = busy.get(key, 0) + 1
            if not ok:
                self._discard_body()
                msg = f"more than {MAX_REQUESTS_PER_TOKEN} requests of this token at once"
                self._send(429, protocol.error_body("rate_limit_error", "too_many_requests", msg))
            try:
                yield ok
            finally:
                if ok:
                    with busy_lock:
                        busy[key] -= 1
                        if not busy[key]:
                            del busy[key]

    return Handler
