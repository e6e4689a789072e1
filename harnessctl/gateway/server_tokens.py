"""Prompt token ids from a server that does not return them with the completion.

vLLM returns a prompt's token ids with the completion when asked (``return_token_ids``).
llama.cpp's server does not, but it offers its own chat template and tokenizer as endpoints
(``POST /apply-template``, then ``POST /tokenize``): the exact ids the server fed the model.
They are asked for only when a call wanted token ids and the completion had no prompt ids,
and kept only when their count equals the prompt tokens the server reported; a server without
those endpoints is remembered and not asked again.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

_unsupported: set[str] = set()
_lock = threading.Lock()


def prompt_ids(
    api_base: str, messages: list[dict[str, Any]], tools: Any, expected: int, timeout_s: float
) -> list[int] | None:
    """The prompt's token ids as the server at ``api_base`` tokenizes it, or None when it
    cannot say (no such endpoints, an error, or a count other than ``expected``)."""
    root = api_base.rstrip("/").removesuffix("/v1")
    with _lock:
        if root in _unsupported:
            return None
    request: dict[str, Any] = {"messages": messages}
    if tools:
        request["tools"] = tools
    try:
        prompt = _post(root + "/apply-template", request, timeout_s).get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("no prompt in the answer")
        tokens = _post(
            root + "/tokenize",
            {"content": prompt, "add_special": True, "parse_special": True},
            timeout_s,
        ).get("tokens")
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 405, 501):
            with _lock:
                _unsupported.add(root)
        return None
    except (OSError, ValueError):
        return None
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        return None
    return tokens if len(tokens) == expected else None


def _post(url: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 (loopback URL)
        data = json.loads(resp.read())
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data
