"""The rollout cache key: every input that can change a rollout's outcome, hashed in one place.

A rollout recorded under a key is served, instead of run, to any later request whose key is
equal (from the store itself or from a read-through cache, ``docs/store.md``). Anything that
can change an outcome and is left out of the key would serve a stale result, so every input
is a field of :class:`RolloutInputs` and a test changes each field and sees the key change.
What stays out, by decision (docs/decisions.md): the sandbox backend and the executor (both
run the same runtime under the same limits), worker counts, retries, and credentials.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..sandbox import Limits

if TYPE_CHECKING:
    from ..envs import Environment, Task
    from ..policy import Policy
    from .evaluate import EvalRequest

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
    """Code version: the runtime protocol and sources, the environment's version (its
    sandbox code's hash for an in-sandbox kind), an offline policy's code version."""
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


def runtime_of(env: Environment, policy: Policy) -> str:
    """The code-version part of the key (``harness.rollout_version``)."""
    from ..harness import rollout_version

    return rollout_version(env, policy.model)


def budget_key(request: EvalRequest) -> str:
    """A request's budgets, canonical: its sandbox limits and the gateway's call, token,
    step and reset caps (an evolve run's identity includes them: ``evolve.engine``)."""
    inputs = request_inputs(request, runtime="")
    budget = {
        **vars(inputs.limits),
        "max_calls": inputs.max_calls,
        "max_tokens": inputs.max_tokens,
        "max_steps": inputs.max_steps,
        "max_resets": inputs.max_resets,
    }
    return json.dumps(budget, sort_keys=True, separators=(",", ":"))


def request_inputs(
    request: EvalRequest, *, runtime: str, task: Task | None = None, seed: int = 0
) -> RolloutInputs:
    """The inputs of the rollout of ``task`` at ``seed`` under ``request`` (``runtime`` from
    :func:`runtime_of`, computed once per request)."""
    from .. import bounds
    from .budget import resolve_budgets

    env = request.suite.environment
    budgets = resolve_budgets(env, max_calls=request.max_calls, max_tokens=request.max_tokens)
    return RolloutInputs(
        harness_hash=request.harness.hash,
        task_hash=task.content_hash if task is not None else "",
        policy_id=request.policy.id,
        seed=seed,
        runtime=runtime,
        env_options=dict(request.suite.config.env_options),
        limits=request.limits,
        max_calls=budgets.max_calls,
        max_tokens=budgets.max_tokens,
        max_steps=budgets.max_steps,
        max_resets=bounds.MAX_RESETS,
    )
