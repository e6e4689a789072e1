"""Every bound on what one rollout can make the host hold or do, in one place.

A harness and everything it writes are untrusted; so is the model when it is hostile. What a
rollout can make the host keep (model calls, environment steps and resets, the runtime's
files, output) and do (score its state, hold gateway connections) is bounded here, and
docs/sandboxes.md ("Bounds") lists each value. Pure Python, stdlib only: the gateway, the
rollout and the scorers import it.
"""

from __future__ import annotations

import json
import threading
from typing import Any

MiB = 1024 * 1024

# --- what the host keeps of one rollout ------------------------------------------------------
MAX_RECORD_BYTES = 32 * MiB
"""Bytes of model calls (request bodies, replies, token ids) and environment steps and resets
(requests, observations, info) the gateway records for one rollout. Past it, requests are
refused unsent and unrecorded, and the rollout ends ``context_limit`` (``RECORD_LIMIT``)."""
MAX_RECORDS = 4096
"""Records (model calls, steps, resets, refusals included) kept for one rollout."""
REFUSED_RECORD_BYTES = 1024
"""What a refused request costs the record: its body is not kept, only that it came, its
size and why it was refused."""
MAX_ERROR_CHARS = 500
"""Characters of a refusal reason kept (a reason may quote the harness's request)."""
MAX_RESETS = 8
"""Resets of a host-served episode per rollout (the runtime resets once); steps are bounded
by the environment's ``max_steps``."""
MAX_EVENTS_BYTES = 4 * MiB
"""The runtime's ``events.jsonl``: read up to this size, the rest dropped."""
MAX_RESULT_BYTES = 1_000_000
"""The runtime's ``result.json``: a larger one is not read (``harness_error``)."""
TAIL_BYTES = 4000
"""Bytes of the sandbox's stdout and of its stderr kept (the tail), on either backend."""
MAX_JSON_DEPTH = 32
"""Nesting depth of harness-written JSON the host keeps (step arguments, function specs,
events, the final answer); deeper is refused or dropped, never a host crash."""
RECORD_LIMIT = "record_limit"
"""The prefix of a rollout's error when it hit ``MAX_RECORD_BYTES`` or ``MAX_RECORDS``."""

# --- host scoring -------------------------------------------------------------------------------
SCORE_TIMEOUT_S = 20.0
"""Wall clock of host scoring that reads the sandbox's files (DBBench's table hash), in a
worker process killed at the limit: the rollout ends ``timeout``."""
SCORE_MEMORY_BYTES = 1024 * MiB
"""Address space of that worker (``RLIMIT_AS``)."""
CHECK_OUTPUT_BYTES = 64 * 1024
"""Output of one OS check script the host keeps (its output is the next check's argument, and
Linux caps one argument at 128 KiB); the rest is read and dropped, so a check the agent
shadowed cannot grow the host's memory."""
SCORE_MAX_VALUE_BYTES = 32 * MiB
"""The largest string or blob one SQLite step may build while scoring
(``SQLITE_LIMIT_LENGTH``): ``zeroblob(400000000)`` fails at once instead of running."""

# --- the gateway ------------------------------------------------------------------------------
MAX_BODY_BYTES = 8 * MiB
"""One request body (a 128k-token context is well under 1 MiB of JSON)."""
MAX_BODY_BYTES_IN_FLIGHT = 64 * MiB
"""All request bodies held at once (read, not yet answered), every rollout together."""
MAX_CONNECTIONS = 256
"""Connections served at once. At the cap, the oldest connection that has not yet sent its
headers (or is being drained after a refusal) is closed to make room; only when there is
none is the new one closed."""
MAX_REQUESTS_PER_TOKEN = 32
"""Connections of one rollout past its headers at once (reading a body, waiting for the
model, answering); more get 429."""
HEADER_DEADLINE_S = 10.0
"""A connection must send a request's line and headers within this (idle keep-alive
included), whatever its pace."""
REQUEST_DEADLINE_S = 60.0
"""... and the whole request, body included, within this from its first byte."""
SOCKET_TIMEOUT_S = 30
"""One socket read or write."""


class ScoringLimit(Exception):
    """Host scoring stopped at its limit (``SCORE_TIMEOUT_S``): the rollout ends ``timeout``,
    this message its error."""


class RecordMeter:
    """The bytes and records one rollout has made the host keep (thread-safe).

    ``take`` reserves room before something is kept; ``add`` counts what was kept anyway
    (a reply, an observation: bounded elsewhere, known only afterwards). Once a reservation
    fails, ``hit`` says why and ``dropped`` counts what was refused unrecorded.
    """

    def __init__(self, max_bytes: int = MAX_RECORD_BYTES, max_records: int = MAX_RECORDS):
        self.max_bytes, self.max_records = max_bytes, max_records
        self.used = 0
        self.records = 0
        self.dropped = 0
        self.hit: str | None = None
        self._lock = threading.Lock()

    def take(self, nbytes: int, what: str) -> bool:
        """Reserve ``nbytes`` and one record for ``what``; False (and nothing kept) past a
        bound."""
        with self._lock:
            if self.records + 1 > self.max_records or self.used + nbytes > self.max_bytes:
                self.dropped += 1
                if self.hit is None:
                    self.hit = (
                        f"{RECORD_LIMIT}: the rollout made the host record more than "
                        f"{self.max_bytes} bytes or {self.max_records} records "
                        f"(at a {what} of {nbytes} bytes)"
                    )
                return False
            self.used += nbytes
            self.records += 1
            return True

    def add(self, nbytes: int) -> None:
        with self._lock:
            self.used += max(0, nbytes)

    @property
    def full(self) -> bool:
        with self._lock:
            return self.hit is not None

    def summary(self) -> str | None:
        """The rollout's record-limit error, with how many requests went unrecorded."""
        with self._lock:
            if self.hit is None:
                return None
            return f"{self.hit}; {self.dropped} request(s) refused and not recorded"


def clip_error(text: str) -> str:
    """A refusal reason as recorded: at most ``MAX_ERROR_CHARS`` characters."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return text[:MAX_ERROR_CHARS] + f"... [{len(text) - MAX_ERROR_CHARS} more chars]"


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` (parsed JSON) nests lists and mappings deeper than ``limit``
    (iterative: a hostile depth cannot exhaust the stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, list | tuple):
            children = list(item)
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def loads_untrusted(raw: bytes | str, limit: int = MAX_JSON_DEPTH) -> Any:
    """Parse harness-written JSON; ValueError when it is not JSON or nests deeper than
    ``limit`` (a RecursionError of the parser included)."""
    try:
        value = json.loads(raw)
    except RecursionError as exc:
        raise ValueError(f"nested deeper than {limit} levels") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8: {exc}") from exc
    if too_deep(value, limit):
        raise ValueError(f"nested deeper than {limit} levels")
    return value
