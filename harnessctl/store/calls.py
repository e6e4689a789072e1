"""Model calls made on the host (an editor's, a voter's) as plain records, before storing.

Editors and voters call litellm directly rather than through a rollout's gateway, so they
describe each call with a :class:`HostCall` and whoever holds the store writes it to the
one call log (``Store.record_calls``) with its purpose and owner (an edit, a run). Pure
Python: building one imports neither SQLAlchemy nor litellm.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

# ModelCallRow.purpose values: who made the call.
POLICY = "policy"  # the harness under evaluation, through the rollout's gateway
EDITOR = "editor"  # an LLM editor proposing a harness patch
VOTER = "voter"  # an LLM voter ranking harnesses for a failed task
CALL_PURPOSES = (POLICY, EDITOR, VOTER)
#: A host-served episode's own calls (``harnessctl.envs.ModelAccess``) are logged under
#: ``env:<purpose>`` (``env:user``, ``env:judge``) with their rollout, apart from ``policy``.
ENV_PREFIX = "env:"


@dataclass
class HostCall:
    """One model call made on the host, answered or failed.

    ``params`` are the call's parameters with secrets (``api_key``...) redacted: build it
    with :meth:`of`, which redacts them.
    """

    model: str
    status: str  # a CallRecord status: ok, upstream_error, context_limit, bad_request
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    error: str | None = None
    reply: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    started_at: float = field(default_factory=time.time)

    @classmethod
    def of(
        cls,
        model: str,
        params: dict[str, Any],
        started_at: float,
        *,
        completion: Any = None,
        error: BaseException | None = None,
    ) -> HostCall:
        """The record of a ``harnessctl.gateway.llm.complete`` call: its ``Completion``, or
        the exception it raised."""
        from harnessctl.gateway.protocol import redact

        safe = redact(dict(params))
        if completion is not None:
            return cls(
                model=str(completion.model or model),
                status="ok",
                prompt_tokens=int(completion.prompt_tokens),
                completion_tokens=int(completion.completion_tokens),
                cost_usd=float(completion.cost_usd),
                latency_s=float(completion.latency_s),
                attempts=int(completion.attempts),
                reply=completion.content,
                params=safe,
                started_at=started_at,
            )
        text = f"{type(error).__name__}: {error}" if error is not None else None
        for key, value in params.items():  # a provider may echo a key back in its error
            if text and safe.get(key) != value and isinstance(value, str) and len(value) >= 4:
                text = text.replace(value, "***")
        return cls(
            model=model,
            status=_status_of(error),
            latency_s=max(0.0, time.time() - started_at),
            attempts=int(getattr(error, "attempts", 1) or 1),
            error=text[:2000] if text else None,
            params=safe,
            started_at=started_at,
        )


def _status_of(error: BaseException | None) -> str:
    name = type(error).__name__
    if name == "ContextWindowError":
        return "context_limit"
    if name == "ModelRequestError":
        return "bad_request"
    return "upstream_error"


@dataclass
class CallTotals:
    """Calls, tokens and cost of one slice of the call log (``Store.call_totals``)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
