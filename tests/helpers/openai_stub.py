"""A scripted, local OpenAI-compatible chat server for tests (standard library only).

Usage::

    with OpenAIStub() as stub:
        stub.reply("SELECT 1", prompt_tokens=12).fail(500).reply("done")
        litellm.completion(model="openai/stub-model", api_base=stub.url, api_key="x", ...)
        assert len(stub.requests) == 1

Each ``POST /v1/chat/completions`` consumes the next queued behaviour; when the queue is empty
the ``default`` behaviour answers (a plain reply unless replaced). ``content`` of a reply may be a
callable taking the request body, for tests that answer from the prompt (voters, editors).
A reply may carry OpenAI ``tool_calls`` (``stub.calls(...)``): function calling as a real
server does it (``content`` null unless given, finish reason ``tool_calls``).
Every request received is recorded, in arrival order, before it is answered.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Content = str | Callable[[dict[str, Any]], str]


@dataclass
class Reply:
    """Answer 200 with one assistant message and the given usage."""

    content: Content | None
    prompt_tokens: int = 10
    completion_tokens: int = 5
    finish_reason: str | None = None  # "tool_calls" when there are some, else "stop"
    tool_calls: list[dict[str, Any]] | None = None
    #: More fields of the choice and of the body, as a server adds them (vLLM's
    #: ``token_ids`` and ``prompt_token_ids``, a ``logprobs`` object...); a callable takes the
    #: request body.
    choice_extra: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]] | None = None
    body_extra: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]] | None = None


@dataclass
class Fail:
    """Answer with an HTTP error status and an OpenAI-style error body."""

    status: int
    message: str = "stub failure"
    code: str | None = None
    type: str = "server_error"


@dataclass
class Hang:
    """Sleep ``seconds`` (longer than the client's timeout), then answer ``then``."""

    seconds: float
    then: Reply | Fail = field(default_factory=lambda: Reply("late"))


@dataclass
class Garbage:
    """Answer 200 with a body that is not JSON."""

    body: bytes = b"<html>this is not json"


Behaviour = Reply | Fail | Hang | Garbage


@dataclass
class StubRequest:
    """One request the stub received."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any] | None
    at: float


class OpenAIStub:
    """OpenAI-compatible server on 127.0.0.1:<ephemeral> answering from a scripted queue."""

    def __init__(
        self,
        default: Behaviour | None = None,
        only: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        self.default: Behaviour = default if default is not None else Reply("stub reply")
        #: When given, a chat request whose body it refuses is answered by ``default`` and kept
        #: in ``strays`` instead of ``requests``: it neither consumes the queue nor is counted
        #: (a request of another test's leftover thread that found this stub's port).
        self.only = only
        self.strays: list[StubRequest] = []
        #: Status of ``GET /v1/models``: 200 lists ``stub-model``; 401/403 refuse the key
        #: as a real server does; 404 is a server without a model list.
        self.models_status = 200
        #: The model ids ``GET /v1/models`` lists (a vLLM server lists its served name).
        self.models = ["stub-model"]
        self.requests: list[StubRequest] = []
        self._queue: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL to pass as ``api_base`` (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # --- scripting (each returns self, so calls chain) ---
    def push(self, *behaviours: Behaviour) -> OpenAIStub:
        with self._lock:
            self._queue.extend(behaviours)
        return self

    def reply(self, content: Content, **usage: Any) -> OpenAIStub:
        return self.push(Reply(content, **usage))

    def calls(self, *calls: tuple[str, str, dict[str, Any] | str], **kw: Any) -> OpenAIStub:
        """Answer with function calls, each ``(id, name, arguments)``; ``content=`` adds text."""
        tool_calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for call_id, name, args in calls
        ]
        return self.push(Reply(kw.pop("content", None), tool_calls=tool_calls, **kw))

    def fail(self, status: int, message: str = "stub failure", **kw: Any) -> OpenAIStub:
        return self.push(Fail(status, message, **kw))

    def hang(self, seconds: float, then: Reply | Fail | None = None) -> OpenAIStub:
        return self.push(Hang(seconds, then if then is not None else Reply("late")))

    def garbage(self) -> OpenAIStub:
        return self.push(Garbage())

    @property
    def chat_requests(self) -> list[StubRequest]:
        """Requests to the chat completions endpoint only."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def close(self) -> None:
        self._closing.set()  # wakes any Hang early so shutdown is quick
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OpenAIStub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- used by the handler ---
    def _next(self, req: StubRequest) -> Behaviour:
        with self._lock:
            if self.only is not None and not self.only(req.body or {}):
                self.strays.append(req)
                return self.default
            self.requests.append(req)
            return self._queue.popleft() if self._queue else self.default


def _completion_body(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    content = reply.content(request) if callable(reply.content) else reply.content
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    finish_reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    choice_extra = (
        reply.choice_extra(request) if callable(reply.choice_extra) else reply.choice_extra
    )
    body_extra = reply.body_extra(request) if callable(reply.body_extra) else reply.body_extra
    return {
        **(body_extra or {}),
        "id": f"chatcmpl-stub-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(request.get("model", "stub-model")),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason,
                **(choice_extra or {}),
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def _make_handler(stub: OpenAIStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # keep test output clean

        def _send(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (timed out) before we answered: expected with Hang

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models") and stub.models_status != 200:
                error = {"error": {"message": f"stub /models status {stub.models_status}"}}
                self._send(stub.models_status, json.dumps(error).encode())
            elif self.path.rstrip("/").endswith("/models"):
                data = {
                    "object": "list",
                    "data": [{"id": name, "object": "model"} for name in stub.models],
                }
                self._send(200, json.dumps(data).encode())
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            req = StubRequest("POST", self.path, headers, body, time.time())
            if not self.path.endswith("/chat/completions"):
                stub._next(req)
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            self._answer(stub._next(req), body or {})

        def _answer(self, behaviour: Behaviour, body: dict[str, Any]) -> None:
            if isinstance(behaviour, Hang):
                if stub._closing.wait(behaviour.seconds):
                    return
                behaviour = behaviour.then
            if isinstance(behaviour, Reply):
                self._send(200, json.dumps(_completion_body(behaviour, body)).encode())
            elif isinstance(behaviour, Fail):
                err = {"message": behaviour.message, "type": behaviour.type, "code": behaviour.code}
                self._send(behaviour.status, json.dumps({"error": err}).encode())
            elif isinstance(behaviour, Garbage):
                self._send(200, behaviour.body, ctype="text/html")

    return Handler
