"""What the gateway records per rollout: budgets, one record per model call, and the totals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harnessctl import bounds
from harnessctl.constants import DEFAULT_MAX_CALLS, DEFAULT_MAX_STEPS, DEFAULT_MAX_TOKENS

# CallRecord.status values.
OK = "ok"
BUDGET_EXCEEDED = "budget_exceeded"
CONTEXT_LIMIT = "context_limit"
UPSTREAM_ERROR = "upstream_error"
BAD_REQUEST = "bad_request"
CALL_STATUSES = (OK, BUDGET_EXCEEDED, CONTEXT_LIMIT, UPSTREAM_ERROR, BAD_REQUEST)


@dataclass
class Budget:
    """Per-rollout limits. A call is refused once ``max_calls`` calls went upstream or once
    ``max_tokens`` (prompt + completion, all calls) are used; a reply that crosses
    ``max_tokens`` is withheld from the harness (its tokens still count)."""

    max_calls: int = DEFAULT_MAX_CALLS
    max_tokens: int = DEFAULT_MAX_TOKENS
    #: Environment steps a host-served episode may take (resets are counted apart).
    max_steps: int = DEFAULT_MAX_STEPS
    #: Resets of a host-served episode (the runtime resets once).
    max_resets: int = field(default_factory=lambda: bounds.MAX_RESETS)
    #: Bytes and records of calls, steps and resets the host keeps (``harnessctl.bounds``,
    #: read when the budget is made).
    max_record_bytes: int = field(default_factory=lambda: bounds.MAX_RECORD_BYTES)
    max_records: int = field(default_factory=lambda: bounds.MAX_RECORDS)

    def __post_init__(self) -> None:
        limits = (self.max_calls, self.max_tokens, self.max_steps, self.max_resets)
        if min(*limits, self.max_record_bytes, self.max_records) < 0:
            raise ValueError(f"budget limits must be >= 0, got {self}")


@dataclass
class CallRecord:
    """One request the harness made, answered or refused.

    ``params`` are the parameters sent upstream (harness sampling settings overridden by the
    policy's, ``tool_choice``...), with secrets such as ``api_key`` redacted; the function specs
    the request offered are in ``tools`` instead (None when it offered none). ``reply`` is the
    reply's text and ``tool_calls`` its function calls in the OpenAI shape (``{id, type,
    function: {name, arguments}}``, arguments a JSON string); both are kept even when withheld
    for the budget, for audit. ``model`` is the model name the provider reported.
    """

    index: int
    model: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    reply: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float
    attempts: int
    status: str  # one of CALL_STATUSES
    error: str | None
    started_at: float  # unix time the request arrived
    tools: list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None  # the provider's: stop, length (cut), tool_calls...
    #: Token-level capture (when the policy asked for it and the server returned it).
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None
    #: Who made the call: ``agent`` (the harness, through the gateway's endpoint) or
    #: ``env:<purpose>`` (a host-served episode, through its ``ModelAccess``).
    caller: str = "agent"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class RolloutLedger:
    """Every model call of one rollout, ordered by ``index``, and why it may have gone wrong.

    ``infra_error`` is set when the gateway or provider failed (the host classifies the rollout
    ``infra_error`` and retries it); ``budget_exceeded`` when a call was refused for the budget;
    ``config_error`` (with ``infra_error``) when the provider refused the run's own
    configuration (credentials, model name, a policy parameter): retrying cannot help, and
    the host stops the run instead of recording a task outcome. ``record_limit`` is set when
    the rollout made the host record more than its bound (``harnessctl.bounds.RecordMeter``):
    the rollout ends ``context_limit``, its record cut there.
    """

    rollout_id: str
    model: str
    calls: list[CallRecord] = field(default_factory=list)
    #: Resets and steps of a host-served episode (``harnessctl.records.EnvStep``).
    steps: list[Any] = field(default_factory=list)
    #: Calls the episode made on the host (``ModelAccess``: a simulated user, a judge), each
    #: with its ``caller``; recorded and costed apart, never counted in the budget (the
    #: totals below are the agent's).
    env_calls: list[CallRecord] = field(default_factory=list)
    infra_error: str | None = None
    budget_exceeded: str | None = None
    config_error: str | None = None
    record_limit: str | None = None

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.calls)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost_usd(self) -> float:
        return sum(c.cost_usd for c in self.calls)

    @property
    def latency_s(self) -> float:
        return sum(c.latency_s for c in self.calls)

    @property
    def env_cost_usd(self) -> float:
        """What the episode's own model calls cost (not in :attr:`cost_usd`)."""
        return sum(c.cost_usd for c in self.env_calls)
