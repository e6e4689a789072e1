"""The sandbox side of the model gateway: a tiny OpenAI chat client over a unix socket.

Standard library only (this runs inside the sandbox). The host passes the gateway address and
a per-rollout token in ``HXRT_GATEWAY`` / ``HXRT_TOKEN``; the address is ``unix:///path`` or,
when the host opted into loopback TCP, ``http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# Mirrors harnessctl.constants.RT_ENV_GATEWAY / RT_ENV_TOKEN (this package cannot import it).
ENV_GATEWAY = "HXRT_GATEWAY"
ENV_TOKEN = "HXRT_TOKEN"
CHAT_PATH = "/v1/chat/completions"


class GatewayError(Exception):
    """Infrastructure failure: the gateway is unreachable, or it or the provider failed (5xx)."""


class BudgetExceeded(Exception):
    """The rollout's call or token budget is used up; the reply (if any) was withheld."""


class ContextLimit(Exception):
    """The conversation no longer fits the model's context window."""


class ModelRequestError(Exception):
    """The request was refused (400 bad request, 401 bad token, other 4xx)."""


@dataclass
class ModelReply:
    """The assistant's text, the ``usage`` dict and the whole response JSON."""

    content: str
    usage: dict[str, Any]
    raw: dict[str, Any]


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
    """Chat with the rollout's model through the host gateway (one connection per call)."""

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
        """Build from ``HXRT_GATEWAY`` and ``HXRT_TOKEN``; GatewayError if either is missing."""
        address, token = os.environ.get(ENV_GATEWAY), os.environ.get(ENV_TOKEN)
        if not address or not token:
            raise GatewayError(f"{ENV_GATEWAY} and {ENV_TOKEN} must both be set")
        return cls(address, token, timeout_s)

    def _connection(self) -> http.client.HTTPConnection:
        if self._unix_path is not None:
            return _UnixHTTPConnection(self._unix_path, self.timeout_s)
        return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, bytes]:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        conn = self._connection()
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:  # includes timeouts and refusals
            raise GatewayError(f"gateway {self.address} unreachable: {exc!r}") from exc
        finally:
            conn.close()

    def chat(self, messages: list[dict[str, Any]], **params: Any) -> ModelReply:
        """One chat completion. ``params``: temperature, top_p, max_tokens, stop, seed (the
        rollout's policy may override them; ``model`` is chosen by the host, not here)."""
        status, payload = self._request("POST", CHAT_PATH, {"messages": messages, **params})
        body = _json(payload)
        if status != 200:
            raise _error_for(status, body, payload)
        try:
            content = body["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise GatewayError(f"malformed gateway reply: {payload[:200]!r}") from exc
        return ModelReply(content=content, usage=dict(body.get("usage") or {}), raw=body)

    def models(self) -> list[str]:
        """The model ids this rollout may use (exactly one: the rollout's policy)."""
        status, payload = self._request("GET", "/v1/models", None)
        body = _json(payload)
        if status != 200:
            raise _error_for(status, body, payload)
        return [m["id"] for m in body.get("data", [])]


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
