"""The outcomes a rollout can end in (README, "How a rollout runs"), and how the host
classifies one.

Classification order (first match wins):
1. ``infra_error``   the sandbox or the gateway failed, as the host observed it (retried,
   never a task failure); a runtime status ``infra_error`` is only the harness's word, and
   is ``harness_error`` unless the host saw the failure too;
2. ``timeout``       the host killed the rollout at its wall-clock limit, or stopped scoring
   its final state at the scoring limit (``harnessctl.bounds.SCORE_TIMEOUT_S``);
3. ``context_limit`` the rollout made the host record more than its bound (the error starts
   with ``record_limit``; ``harnessctl.bounds.MAX_RECORD_BYTES``), whatever it answered;
4. ``harness_error`` harness code raised, the runtime died without a result or left a
   malformed one, or it reported an infrastructure failure the host did not see;
5. ``success``       the host-side scorer accepted the final state / answer;
6. otherwise the failure the runtime reported when the episode ended:
   ``invalid_format`` (no parsable action, or a final answer that is not a list),
   ``invalid_action`` (the harness rejected an action and gave up),
   ``context_limit`` (the per-rollout token/call budget or the model's window ran out),
   ``tool_error`` (the harness aborted on a tool error, or the episode ran out of rounds
   while its last ``TOOL_ERROR_STREAK`` tool calls all failed: stuck on errors, not on time),
   ``step_limit`` (rounds or environment steps used up), ``wrong_answer`` (the episode
   completed, scored wrong: a final answer, or a host-served environment that ended it).
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    SUCCESS = "success"
    WRONG_ANSWER = "wrong_answer"
    INVALID_FORMAT = "invalid_format"
    INVALID_ACTION = "invalid_action"
    TOOL_ERROR = "tool_error"
    STEP_LIMIT = "step_limit"
    CONTEXT_LIMIT = "context_limit"
    HARNESS_ERROR = "harness_error"
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"


ALL_OUTCOMES: tuple[str, ...] = tuple(o.value for o in Outcome)
FAILURE_OUTCOMES: tuple[str, ...] = tuple(
    o.value for o in Outcome if o not in (Outcome.SUCCESS, Outcome.INFRA_ERROR)
)
TOOL_ERROR_STREAK = 3

# Statuses the sandbox runtime writes to result.json when an episode ends.
RUNTIME_STATUSES = (
    "answered",
    "done",  # a host-served environment ended the episode (won, lost or closed)
    "invalid_format",
    "invalid_action",
    "tool_error",
    "step_limit",
    "context_limit",
    "harness_error",
    "infra_error",
)


def classify(
    *,
    infra_error: bool,
    timed_out: bool,
    runtime_status: str | None,
    success: bool,
    answer_unparsable: bool = False,
    tool_error_streak: int = 0,
    record_limit: bool = False,
) -> Outcome:
    """Map what the host observed (``infra_error``, ``timed_out``, ``record_limit``), what
    the runtime reported and what the scorer decided to exactly one outcome."""
    if infra_error:
        return Outcome.INFRA_ERROR
    if timed_out:
        return Outcome.TIMEOUT
    if record_limit:
        return Outcome.CONTEXT_LIMIT
    if runtime_status in (None, "harness_error", "infra_error"):  # infra: its word alone
        return Outcome.HARNESS_ERROR
    if success:
        return Outcome.SUCCESS
    if runtime_status == "done":
        return Outcome.WRONG_ANSWER  # the environment ended the episode and it was not won
    if runtime_status == "answered":
        return Outcome.INVALID_FORMAT if answer_unparsable else Outcome.WRONG_ANSWER
    if runtime_status == "step_limit" and tool_error_streak >= TOOL_ERROR_STREAK:
        return Outcome.TOOL_ERROR
    if runtime_status in RUNTIME_STATUSES:
        return Outcome(runtime_status)
    return Outcome.HARNESS_ERROR


def explain(outcome: str, runtime_status: str | None, tool_error_streak: int = 0) -> str | None:
    """Why the host's outcome differs from the status the runtime reported (None when it
    does not, or needs no words): the order above, said for one rollout."""
    if outcome == runtime_status:
        return None
    if outcome == Outcome.TOOL_ERROR and runtime_status == "step_limit":
        return (
            f"the rounds ran out while the last {tool_error_streak} tool calls all failed "
            f"(at least {TOOL_ERROR_STREAK}): stuck on errors, not on time, so tool_error"
        )
    if outcome == Outcome.TIMEOUT:
        return (
            "the host killed the rollout at its wall-clock limit (or stopped scoring it at "
            "the scoring limit), whatever the runtime said"
        )
    if outcome == Outcome.INFRA_ERROR:
        return "the sandbox or the gateway failed: not the harness's doing"
    if outcome == Outcome.HARNESS_ERROR and runtime_status == "infra_error":
        return (
            "the runtime reported an infrastructure failure the host did not observe: "
            "only the host's own observation makes an infra_error"
        )
    if outcome == Outcome.CONTEXT_LIMIT:
        return (
            "the rollout made the host record more than its bound (record_limit), or ran "
            "out of its token or call budget"
        )
    if outcome == Outcome.HARNESS_ERROR:
        return "harness code raised, or the runtime ended without a result"
    if outcome == Outcome.SUCCESS:
        return "the host's scorer accepted the final state or answer"
    if outcome == Outcome.INVALID_FORMAT and runtime_status == "answered":
        return "the final answer could not be parsed as the answer format the scorer needs"
    if outcome == Outcome.WRONG_ANSWER and runtime_status in ("answered", "done"):
        return "the episode ended and the host's scorer did not accept it"
    return None
