"""The rollout cache key: every input that can change a rollout's outcome, hashed in one place.

A rollout recorded under a key is served, instead of run, to any later request whose key is
equal (from the store itself or from a read-through cache, ``docs/store.md``). Anything that
can change an outcome and is left out of the key would serve a stale result, so every input
is a field of :class:`RolloutInputs` and a test changes each field and sees the key change
(``run.evaluate.request_inputs`` fills them from a request).
What stays out, by decision (docs/decisions.md): the sandbox backend and the executor (both
run the same runtime under the same limits), worker counts, retries, and credentials.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..sandbox import Limits

KEY_VERSION = 2
"""Bumped when the key's recipe changes (every key changes with it)."""


@dataclass(frozen=True)
class RolloutInputs:
    """Everything a rollout's outcome depends on besides chance, which ``seed`` fixes."""

    harness_hash: str
    """Content hash of the harness directory (code, prompts, manifest)."""
    task_hash: str
    """Content hash of the task record, gold included (a changed check is another task)."""
    policy_id: str
    """The model string and its canonical sampling params (``Policy.id``; no credentials)."""
    seed: int
    """The rollout's seed: the offline policies' draws, and the seed sent upstream."""
    runtime: str
    """Code version (``harness.rollout_version``): the runtime protocol and sources, the
    environment's cache identity (``Environment.cache_version``: its kind, its ``version``
    salt, its package's content hash, sources and verdict data alike, what else decides its
    outcomes, ``outcome_inputs``, such as a task image's id, and an in-sandbox kind's sandbox
    code hash), an offline policy's code version."""
    env_options: dict[str, Any] = field(default_factory=dict)
    """The suite's ``env_options``: the same task scored otherwise is another rollout."""
    limits: Limits = field(default_factory=Limits)
    """Sandbox limits: wall clock, host wait, memory, CPU seconds, processes, file size, files."""
    max_calls: int = 0
    """The gateway's model-call budget."""
    max_tokens: int = 0
    """The gateway's prompt+completion token budget."""
    max_steps: int = 0
    """The gateway's environment-step budget (host-served environments)."""
    max_resets: int = 0
    """The gateway's episode-reset budget (host-served environments)."""

    def key(self) -> str:
        """The cache key: SHA-256 of the inputs, canonical JSON, with the recipe's version."""
        blob = json.dumps(
            [KEY_VERSION, asdict(self)], sort_keys=True, separators=(",", ":"), default=str
        )
        return hashlib.sha256(blob.encode()).hexdigest()
