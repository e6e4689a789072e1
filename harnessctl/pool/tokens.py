"""A rollout's model calls as token sequences an RL trainer trains on.

A multi-turn rollout is one trainable sequence when its context is append-only: every call's
prompt is the previous call's prompt, then the previous reply, then whatever the harness
added (the environment's observation, a tool result, a re-prompt). Then the first prompt is
the sequence's prompt, and the response is every reply (mask 1: the policy generated it,
with its logprobs) interleaved with what came between (mask 0: the policy did not generate
it). A harness that rewrites its context (summarises, truncates, re-orders) breaks that: the
sequence says so (``append_only`` False, and why) and the calls stay usable one by one
(``samples``: one prompt/response pair per call).

Only calls the server answered and the harness received count (status ``ok``): a refused
call has no tokens, and a reply withheld for the budget never reached the harness. Token ids
come from the server (``harnessctl.gateway.llm.token_capture``): a token it did not report
as generated (llama.cpp does not report the end-of-turn token it stopped on) is part of the
mask-0 segment that follows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import HarnessctlError
from ..records import ModelCall


@dataclass(frozen=True)
class CallSample:
    """One call as a prompt/response pair: the per-call view that always exists."""

    index: int
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float] | None
    finish_reason: str | None = None


@dataclass(frozen=True)
class TokenSequence:
    """A rollout's tokens (see the module doc). ``logprobs`` has one value per response token
    (0.0 where the mask is 0) and is None when a call lacked them; ``turns`` are the
    ``(start, end)`` spans of each reply in ``response_ids``."""

    append_only: bool
    reason: str
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    turns: list[tuple[int, int]] = field(default_factory=list)
    samples: list[CallSample] = field(default_factory=list)

    @property
    def num_turns(self) -> int:
        return len(self.samples)


class NoTokenIds(HarnessctlError):
    """The rollout's calls carry no token ids: the policy did not ask the server for them,
    or the server does not return them."""


def stitch(calls: list[ModelCall]) -> TokenSequence:
    """The token sequence of a rollout's calls (in index order)."""
    answered = [c for c in sorted(calls, key=lambda c: c.index) if c.status == "ok"]
    if not answered:
        raise NoTokenIds("the rollout made no answered model call: it has no tokens")
    missing = [c.index for c in answered if c.prompt_ids is None or c.completion_ids is None]
    if len(missing) == len(answered):
        raise NoTokenIds(
            "the rollout's calls carry no token ids: ask the server for them "
            "(EndpointPolicy(..., tokens=True), or the params return_token_ids=true and "
            "logprobs=true) and use a server that returns them (vLLM, llama.cpp)"
        )
    samples = [
        CallSample(c.index, list(c.prompt_ids), list(c.completion_ids), c.logprobs, c.finish_reason)
        for c in answered
        if c.prompt_ids is not None and c.completion_ids is not None
    ]
    if missing:
        return TokenSequence(
            False,
            f"call(s) {missing} have no token ids: the server did not return them",
            samples=samples,
        )
    for sample in samples:
        if sample.logprobs is not None and len(sample.logprobs) != len(sample.response_ids):
            return TokenSequence(
                False,
                f"call {sample.index}: {len(sample.logprobs)} logprobs for "
                f"{len(sample.response_ids)} reply tokens",
                samples=samples,
            )
    first = samples[0]
    response = list(first.response_ids)
    mask = [1] * len(response)
    with_logprobs = all(s.logprobs is not None for s in samples)
    logprobs = list(first.logprobs or []) if with_logprobs else []
    turns = [(0, len(response))]
    context = first.prompt_ids + first.response_ids
    for sample in samples[1:]:
        if sample.prompt_ids[: len(context)] != context:
            at = next(
                (
                    i
                    for i, (a, b) in enumerate(zip(sample.prompt_ids, context, strict=False))
                    if a != b
                ),
                min(len(sample.prompt_ids), len(context)),
            )
            return TokenSequence(
                False,
                f"call {sample.index}'s prompt does not extend the previous call's prompt and "
                f"reply (they differ from token {at} on): the harness rewrote its context",
                samples=samples,
            )
        between = sample.prompt_ids[len(context) :]
        response += between
        mask += [0] * len(between)
        start = len(response)
        response += sample.response_ids
        mask += [1] * len(sample.response_ids)
        turns.append((start, len(response)))
        if with_logprobs:
            logprobs += [0.0] * len(between) + list(sample.logprobs or [])
        context = sample.prompt_ids + sample.response_ids
    return TokenSequence(
        True,
        "",
        prompt_ids=list(first.prompt_ids),
        response_ids=response,
        response_mask=mask,
        logprobs=logprobs if with_logprobs else None,
        turns=turns,
        samples=samples,
    )
