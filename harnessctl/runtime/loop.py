"""The agent loop: one harness, one task, model calls through the gateway only."""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from .client import BudgetExceeded, ContextLimit, GatewayClient, GatewayError, ModelReply
from .env import EnvError, StepLimit
from .harness import Failure, Harness, State, Turn


class EventLog:
    """Append-only JSON lines, flushed per event so a killed episode leaves its trace."""

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, event: str, **data) -> None:
        record = {"event": event, "t": round(time.time(), 3), **data}
        self._fh.write(json.dumps(record, default=str) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def _turn_record(turn: Turn) -> dict:
    data = asdict(turn)
    if turn.observation is not None:
        data["observation"] = {"text": turn.observation.text, "ok": turn.observation.ok}
    data["tool_calls"] = [c.to_dict() for c in turn.tool_calls]  # the ledger's OpenAI shape
    return data


def _full_reply(reply: object) -> ModelReply:
    """The client's reply; a stand-in model's reply object becomes one (text, tool calls)."""
    if isinstance(reply, ModelReply):
        return reply
    content = getattr(reply, "content", None) or ""
    calls = list(getattr(reply, "tool_calls", None) or [])
    return ModelReply(content=content, usage={}, raw={}, tool_calls=calls)


def run_episode(harness: Harness, state: State, model: GatewayClient, log: EventLog) -> State:
    """Drive the hooks until the harness stops; sets ``state.status`` and ``state.answer``."""
    while not harness.should_stop(state):
        state.round += 1
        messages = harness.build_context(state)
        try:
            reply = _full_reply(model.chat(messages, **harness.model_params(state)))
        except (BudgetExceeded, ContextLimit) as exc:
            state.status = "context_limit"
            log.write("model_error", round=state.round, kind="context_limit", error=str(exc))
            break
        except GatewayError as exc:
            state.status = "infra_error"
            log.write("model_error", round=state.round, kind="infra_error", error=str(exc))
            break
        state.reply = reply
        turn = _step(harness, state, reply)
        state.turns.append(turn)
        log.write("turn", **_turn_record(turn))
    if state.status is None:
        state.status = "step_limit"
    state.answer = harness.finalize(state)
    return state


def _step(harness: Harness, state: State, reply: ModelReply) -> Turn:
    action = harness.parse_action(reply.content, state)
    turn = Turn(round=state.round, reply=reply.content, kind=action.kind, action=action)
    turn.tool_calls = list(reply.tool_calls)
    if action.kind == "invalid":
        turn.kind = "invalid_format"
        failure = Failure("invalid_format", action.error or "no parsable action", action)
        return _recover(harness, state, turn, failure)
    problem = harness.validate_action(action, state)
    if problem:
        turn.kind = "invalid_action"
        return _recover(harness, state, turn, Failure("invalid_action", problem, action))
    if action.kind == "answer":
        state.answer = action.argument
        state.status = "answered"
        return turn
    try:
        observation = harness.mediate_tool(action, state)
    except StepLimit as exc:  # the environment's step budget is spent
        state.status = "step_limit"
        turn.feedback = str(exc)
        return turn
    except EnvError:  # the host-served environment failed: not the harness's doing
        state.status = "infra_error"
        return turn
    turn.observation = observation
    turn.feedback = observation.text
    # an episode cut at its step limit (``info["truncated"]``) ran out of steps, as when the
    # gateway refuses the next one; its last step still counts in the tool-error streak
    cut = observation.done and isinstance(observation.payload, dict)
    cut = cut and bool(observation.payload.get("truncated"))
    if observation.done and not cut:
        state.status = "done"
        return turn
    if observation.ok:
        state.tool_error_streak = 0
    else:
        state.tool_error_streak += 1
        turn.kind = "tool_error"
    if cut:
        state.status = "step_limit"
    if cut or observation.ok:
        return turn
    return _recover(harness, state, turn, Failure("tool_error", observation.text, action))


def _recover(harness: Harness, state: State, turn: Turn, failure: Failure) -> Turn:
    decision = harness.recover(failure, state)
    if decision.kind == "abort":
        state.status = failure.kind
        return turn
    if decision.message is not None:
        turn.feedback = decision.message
    elif turn.feedback is None:
        turn.feedback = failure.message
    return turn


def episode_result(state: State, error: BaseException | None = None) -> dict:
    result = {
        "status": state.status,
        "answer": state.answer,
        "rounds": state.round,
        "tool_error_streak": state.tool_error_streak,
        "error": None,
        "traceback": None,
    }
    if error is not None:
        result["status"] = "harness_error"
        result["error"] = f"{type(error).__name__}: {error}"
        result["traceback"] = "".join(traceback.format_exception(error))[-4000:]
    return result
