"""LLM voters: any litellm model strings that rank the pool from the behavior cards and the
failure digest. A voter that fails, times out or answers something unusable is reported
and ignored; it never breaks routing.

Every vote carries its model call (:class:`harnessctl.store.calls.HostCall`: tokens, cost,
status); a caller holding a store logs them with :func:`record_vote_calls`, so voter calls
land in the one call log with purpose ``voter``."""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..store.calls import VOTER, HostCall

SYSTEM = (
    "You route a failed LLM-agent task to the harness variant most likely to rescue it. "
    "A harness is the code around the agent (context, validation, recovery, termination). "
    'Reply with JSON only: {"ranking": ["<harness name>", ...]}, best first, using the '
    "exact names given."
)
_JSON_RE = re.compile(r"\{.*\}|\[.*\]", re.DOTALL)


@dataclass(frozen=True)
class Voter:
    """A litellm model string plus call parameters (``api_base``, ``temperature``...)."""

    model: str
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 30.0


@dataclass
class Vote:
    """One voter's answer: a ranking of known names, or why it was ignored."""

    model: str
    ranking: list[str]
    error: str | None = None
    latency_s: float = 0.0
    call: HostCall | None = None
    """The voter's model call, answered or failed (None: no call was made)."""

    @property
    def ok(self) -> bool:
        return self.error is None


def vote_prompt(category: str, digests: list[str], cards: dict[str, str]) -> list[dict[str, str]]:
    """The messages a voter sees: the failure digests and one card per candidate."""
    parts = [f"Task category: {category}", "", "How the base harness failed:"]
    parts += digests or ["(no digest available)"]
    parts += ["", "Candidate harnesses (behavior cards measured on other tasks):"]
    parts += [cards[name] for name in sorted(cards)]
    parts += ["", "Names: " + ", ".join(sorted(cards))]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts)}]


def parse_ranking(content: str, names: list[str]) -> list[str]:
    """Known names in the order the reply gives them; ValueError when none is usable."""
    match = _JSON_RE.search(content or "")
    if match is None:
        raise ValueError("reply holds no JSON")
    data = json.loads(match.group(0))
    ranking = data.get("ranking") if isinstance(data, dict) else data
    if not isinstance(ranking, list):
        raise ValueError("reply has no 'ranking' list")
    known, seen = set(names), []
    for item in ranking:
        if isinstance(item, str) and item in known and item not in seen:
            seen.append(item)
    if not seen:
        raise ValueError("ranking names no candidate harness")
    return seen


def _ask(voter: Voter, messages: list[dict[str, str]], names: list[str]) -> Vote:
    from ..gateway.llm import complete

    started, at = time.monotonic(), time.time()
    call = None
    try:
        try:
            reply = complete(
                voter.model, messages, dict(voter.params), timeout_s=voter.timeout_s, retries=0
            )
        except Exception as exc:
            call = HostCall.of(voter.model, voter.params, at, error=exc)
            raise
        call = HostCall.of(voter.model, voter.params, at, completion=reply)
        ranking = parse_ranking(reply.content, names)
    except Exception as exc:  # classify: any voter failure is recorded and the voter ignored
        text = str(exc).splitlines()[0] if str(exc) else ""
        error = f"{type(exc).__name__}: {text[:200]}"
        return Vote(voter.model, [], error, time.monotonic() - started, call)
    return Vote(voter.model, ranking, None, time.monotonic() - started, call)


def collect_votes(
    voters: list[Voter], category: str, digests: list[str], cards: dict[str, str]
) -> list[Vote]:
    """Ask every voter in parallel; the answers come back in the voters' order."""
    if not voters:
        return []
    messages = vote_prompt(category, digests, cards)
    names = sorted(cards)
    with ThreadPoolExecutor(max_workers=min(8, len(voters))) as pool:
        return list(pool.map(lambda v: _ask(v, messages, names), voters))


def record_vote_calls(store: Any, votes: list[Vote], *, run_id: str | None = None) -> None:
    """Log the voters' model calls in ``store``'s call log (purpose ``voter``)."""
    store.record_calls([v.call for v in votes if v.call is not None], purpose=VOTER, run_id=run_id)
