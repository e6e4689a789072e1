"""Host-side registry of task oracles, keyed by rollout id.

The evaluator registers a task's oracle (gold answer, reference SQL, table) before a rollout
starts and unregisters it afterwards; an oracle-backed offline policy (``sim/dbbench``) looks it
up from the ``rollout_id`` the gateway puts in every model call's metadata. Oracles live only in
the host process: nothing here is ever sent to a sandbox.

The registry is process-global on purpose: litellm instantiates custom providers once and calls
them from any thread, so the provider cannot be handed per-rollout state any other way.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_oracles: dict[str, dict[str, Any]] = {}


def register(rollout_id: str, oracle: Mapping[str, Any]) -> None:
    """Make ``oracle`` visible to offline policies for calls tagged with ``rollout_id``.

    A deep copy is stored so later edits by the caller cannot change a running rollout.
    Re-registering the same id replaces the previous oracle.
    """
    if not rollout_id:
        raise ValueError("rollout_id must be a non-empty string")
    stored = copy.deepcopy(dict(oracle))
    with _lock:
        _oracles[rollout_id] = stored


def lookup(rollout_id: str) -> dict[str, Any] | None:
    """The oracle registered for ``rollout_id``, or None. Callers must not mutate it."""
    with _lock:
        return _oracles.get(rollout_id)


def unregister(rollout_id: str) -> None:
    """Forget the oracle of ``rollout_id``; unknown ids are ignored (rollouts may be retried)."""
    with _lock:
        _oracles.pop(rollout_id, None)


@contextmanager
def registered(rollout_id: str, oracle: Mapping[str, Any]) -> Iterator[None]:
    """Register ``oracle`` for the duration of a ``with`` block (one rollout)."""
    register(rollout_id, oracle)
    try:
        yield
    finally:
        unregister(rollout_id)
