"""The sandbox side of the model gateway: a tiny OpenAI chat client over a unix socket.

Standard library only (this runs inside the sandbox). The host passes the gateway address and
a per-rollout token in ``HXRT_GATEWAY`` / ``HXRT_TOKEN`` (or ``HXRT_TOKEN_FILE``: a file the
runtime reads once and removes where it can, so the token is not in the process's
environment for another process to read from /proc); the address is ``unix:///path`` or,
when the host opted into loopback TCP, ``http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .wire import CHAT_PATH, ENV_GATEWAY, ENV_TOKEN, ENV_TOKEN_FILE, MODELS_PATH

_FILE_TOKENS: dict[str, str] = {}  # token files already read (and removed), by path


class GatewayError(Exception):
    """Infrastructure failure: the gateway is unreachable, or it or the provider failed (5xx)."""


class BudgetExceeded(Exception):
    """The rollout's call or token budget is used up; the reply (if any) was withheld."""


class ContextLimit(Exception):
    """The conversation no longer fits the model's context window."""


class ModelRequestError(Exception):
    """The request was refused (400 bad request, 401 bad token, other 4xx)."""


@dataclass
class ToolCall:
    """One function call the model asked for. ``arguments`` is the JSON text the model wrote,
    unparsed: it may be invalid, and the harness decides what that means."""

    id: str
    name: str
    arguments: str = "{}"

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI shape, as an assistant message's ``tool_calls`` entry."""
        function = {"name": self.name, "arguments": self.arguments}
        return {"id": self.id, "type": "function", "function": function}

    @classmethod
    def from_dict(cls, data: Any) -> ToolCall:
        """From the OpenAI shape; ValueError when it is not that shape."""
        fn = data.get("function") if isinstance(data, dict) else None
        if not isinstance(fn, dict) or not isinstance(data.get("id"), str):
            raise ValueError(f"not a tool call: {data!r:.200}")
        name, arguments = fn.get("name"), fn.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise ValueError(f"not a tool call: {data!r:.200}")
        return cls(id=data["id"], name=name, arguments=arguments)


@dataclass
class ModelReply:
    """The assistant's text, the ``usage`` dict and the whole response JSON; ``tool_calls``
    are the function calls of the reply (empty for a plain text reply)."""

    content: str
    usage: dict[str, Any]
    raw: dict[str, Any]
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over an AF_UNIX stream socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class GatewayClient:
    """Chat with the rollout's model through the host gateway (one connection per call).

    ``timeout_s`` bounds reaching the gateway and its other requests, not the wait for a
    chat reply: the gateway bounds every model call itself (the run's model-call timeout,
    its retries) and always answers, with the reply or the error it classified; the sandbox
    bounds the runtime's life (its own time plus the host waits, up to ``max_wait_s``). A
    reply wait of its own, shorter than the gateway's, gave up on calls the host was still
    making: the host saw no failure, and the rollout ended ``harness_error`` on the
    runtime's word alone (a slow local model at 300 s). Longer, it would never fire.
    """

    def __init__(self, address: str, token: str, timeout_s: float = 300) -> None:
        parts = urlsplit(address)
        if parts.scheme == "unix" and parts.path:
            self._unix_path: str | None = parts.path
        elif parts.scheme == "http" and parts.hostname and parts.port:
            self._unix_path = None
            self._host, self._port = parts.hostname, parts.port
        else:
            raise ValueError(
                f"gateway address must be unix:///path or http://host:port: {address!r}"
            )
        self.address, self.token, self.timeout_s = address, token, timeout_s

    @classmethod
    def from_env(cls, timeout_s: float = 300) -> GatewayClient:
        """Build from ``HXRT_GATEWAY`` and ``HXRT_TOKEN`` (or ``HXRT_TOKEN_FILE``);
        GatewayError if either is missing."""
        address, token = os.environ.get(ENV_GATEWAY), os.environ.get(ENV_TOKEN) or _file_token()
        if not address or not token:
            raise GatewayError(f"{ENV_GATEWAY} and {ENV_TOKEN} must both be set")
        return cls(address, token, timeout_s)

    def _connection(self) -> http.client.HTTPConnection:
        if self._unix_path is not None:
            return _UnixHTTPConnection(self._unix_path, self.timeout_s)
        return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None, *, patient: bool = False
    ) -> tuple[int, bytes]:
        """One request; ``patient``: once connected, wait for the answer however long the
        gateway takes (a model call, which the gateway bounds)."""
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        conn = self._connection()
        try:
            conn.connect()  # within timeout_s: a gateway that is not there is found at once
            if patient and conn.sock is not None:
                conn.sock.settimeout(None)
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:  # includes timeouts and refusals
            raise GatewayError(f"gateway {self.address} unreachable: {exc!r}") from exc
        finally:
            conn.close()

    def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        **params: Any,
    ) -> ModelReply:
        """One chat completion. ``tools`` are OpenAI function specs the model may call and
        ``tool_choice`` how it must (``auto``, ``none``, ``required`` or a named function);
        ``params``: temperature, top_p, max_tokens, stop, seed, parallel_tool_calls (the
        rollout's policy may override them; ``model`` is chosen by the host, not here)."""
        request: dict[str, Any] = {"messages": messages, **params}
        if tools:
            request["tools"] = tools
        if tool_choice is not None:
            request["tool_choice"] = tool_choice
        status, payload = self._request("POST", CHAT_PATH, request, patient=True)
        body = _json(payload)
        if status != 200:
            raise _error_for(status, body, payload)
        try:
            choice = body["choices"][0]
            message = choice["message"]
            content = message.get("content") or ""
            calls = [ToolCall.from_dict(c) for c in message.get("tool_calls") or []]
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise GatewayError(f"malformed gateway reply: {payload[:200]!r}") from exc
        return ModelReply(
            content=content,
            usage=dict(body.get("usage") or {}),
            raw=body,
            tool_calls=calls,
            finish_reason=choice.get("finish_reason"),
        )

    def models(self) -> list[str]:
        """The model ids this rollout may use (exactly one: the rollout's policy)."""
        status, payload = self._request("GET", MODELS_PATH, None)
        body = _json(payload)
        if status != 200:
            raise _error_for(status, body, payload)
        return [m["id"] for m in body.get("data", [])]


def _file_token() -> str | None:
    """The token in ``HXRT_TOKEN_FILE``: read on first use, then the file is removed (where
    the directory allows; the host removes it after the rollout otherwise)."""
    path = os.environ.get(ENV_TOKEN_FILE)
    if not path:
        return None
    if path not in _FILE_TOKENS:
        try:
            with open(path, encoding="utf-8") as fh:
                token = fh.read(4096).strip()
        except OSError:
            return None
        with contextlib.suppress(OSError):
            os.unlink(path)
        if token:
            _FILE_TOKENS[path] = token
    return _FILE_TOKENS.get(path)


def _json(payload: bytes) -> dict[str, Any]:
    try:
        body = json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return body if isinstance(body, dict) else {}


def _error_for(status: int, body: dict[str, Any], payload: bytes) -> Exception:
    error = body.get("error")
    error = error if isinstance(error, dict) else {}
    code = error.get("code")
    message = error.get("message") or payload[:200].decode("utf-8", "replace")
    text = f"HTTP {status} ({code}): {message}" if code else f"HTTP {status}: {message}"
    if status == 400 and code == "budget_exceeded":
        return BudgetExceeded(text)
    if status == 400 and code == "context_length_exceeded":
        return ContextLimit(text)
    if 400 <= status < 500:
        return ModelRequestError(text)
    return GatewayError(text)
