"""A stand-in completer for gateway tests that need no HTTP server at all."""

from __future__ import annotations

import threading
import time

from harnessctl.gateway import llm

MODEL = "openai/stub-model"
ASK = [{"role": "user", "content": "how many rows?"}]


def fake_completer(content: str = "fake", tokens: tuple[int, int] = (10, 5), delay: float = 0.0):
    """A stand-in for llm.complete that records its calls; ``.entered`` is set on each call."""
    seen: list[dict] = []
    entered = threading.Event()

    def complete(model, messages, params, *, metadata, timeout_s, retries, backoff_s):
        seen.append({"model": model, "messages": messages, "params": params, "meta": metadata})
        entered.set()
        time.sleep(delay)
        return llm.Completion(content, *tokens, 0.0, delay, 1, "stop", model)

    complete.seen = seen  # type: ignore[attr-defined]
    complete.entered = entered  # type: ignore[attr-defined]
    return complete
