"""Host-served environments behind the gateway: ``POST /v1/env/reset`` and ``/v1/env/step``.

A rollout opened with an episode (:class:`harnessctl.envs.Episode`) may reset and step it with
its bearer token. Each request is recorded as a :class:`harnessctl.records.EnvStep` in the
rollout's ledger (the record the trajectory stores);
the step budget (``Budget.max_steps``) refuses steps once spent (400 ``step_budget_exceeded``,
the runtime's ``step_limit``). An episode that raises is an infrastructure failure: the
ledger's ``infra_error`` is set (the host retries the rollout) and the harness gets a 502.
Observations and info go to the harness, so environments must keep gold out of them.

Resets are counted too: at most ``Budget.max_resets`` per rollout (400, the same code as the
step budget, so the runtime ends ``step_limit``). Every record costs the rollout's
:class:`harnessctl.bounds.RecordMeter` its request, observation and info bytes (a refused one
``REFUSED_RECORD_BYTES``, its request not kept); past the bound a request is refused before
it reaches the episode and is not recorded. Step arguments nested deeper than
``MAX_JSON_DEPTH`` are refused (400).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from ..bounds import REFUSED_RECORD_BYTES, RecordMeter, clip_error, loads_untrusted
from ..records import EnvStep
from ..runtime.wire import RESET_PATH, STEP_BUDGET_EXCEEDED, STEP_PATH, StepResult
from . import protocol
from .transport import Response

__all__ = ["RESET_PATH", "STEP_PATH", "EpisodeSlot", "handle"]
MAX_ARGUMENT_CHARS = 100_000


@dataclass
class EpisodeSlot:
    """The episode of one rollout and its step accounting (guarded by the rollout's lock)."""

    episode: Any
    max_steps: int
    steps_taken: int = 0
    max_resets: int = 8
    resets_taken: int = 0
    meter: RecordMeter = field(default_factory=RecordMeter)
    done: bool = False
    records: list[EnvStep] = field(default_factory=list)
    # one request at a time per episode (simulators are not thread-safe); not the rollout's
    # lock, so a slow step never holds up the model calls' bookkeeping
    lock: threading.Lock = field(default_factory=threading.Lock)


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        body = loads_untrusted(raw or b"{}")
    except ValueError as exc:
        raise protocol.RequestError(f"body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise protocol.RequestError("body must be a JSON object")
    return body


def _action(body: dict[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
    tool, argument, arguments = body.get("tool"), body.get("argument", ""), body.get("arguments")
    if not isinstance(tool, str) or not tool:
        raise protocol.RequestError("tool must be a non-empty string")
    if not isinstance(argument, str) or len(argument) > MAX_ARGUMENT_CHARS:
        raise protocol.RequestError(f"argument must be a string of <= {MAX_ARGUMENT_CHARS} chars")
    if arguments is not None and not isinstance(arguments, dict):
        raise protocol.RequestError("arguments must be a JSON object")
    return tool, argument, arguments


def handle(rollout: Any, raw: bytes, *, path: str) -> Response:
    """Answer a reset or step request of ``rollout`` (a gateway ``_Rollout``)."""
    slot: EpisodeSlot | None = rollout.episode
    if slot is None:
        msg = "this rollout's environment is not host-served"
        return 404, protocol.error_body("not_found", "no_episode", msg)
    started = time.time()
    kind: Literal["reset", "step"] = "reset" if path == RESET_PATH else "step"
    try:
        body = _parse(raw)
        tool, argument, arguments = (None, "", None) if kind == "reset" else _action(body)
    except protocol.RequestError as exc:
        return 400, protocol.error_body("invalid_request_error", "bad_request", str(exc))
    code = STEP_BUDGET_EXCEEDED  # what the runtime reads as its step limit
    with slot.lock:
        index = len(slot.records)
        record = EnvStep(
            index=index, kind=kind, tool=tool, argument=argument, arguments=arguments,
            started_at=started,
        )  # fmt: skip
        refusal = None
        if kind == "step" and slot.steps_taken >= slot.max_steps:
            record.status = STEP_BUDGET_EXCEEDED
            refusal = f"step budget exhausted: {slot.steps_taken} of {slot.max_steps} steps"
        elif kind == "reset" and slot.resets_taken >= slot.max_resets:
            record.status = "reset_budget_exceeded"
            refusal = f"reset budget exhausted: {slot.resets_taken} of {slot.max_resets} resets"
        if refusal is not None:  # kept without the request: the fact, its size and why
            record.argument, record.arguments = "", None
            record.error = f"{refusal} (request of {len(raw)} bytes, not kept)"
            if slot.meter.take(REFUSED_RECORD_BYTES, kind):
                slot.records.append(record)
            return 400, protocol.error_body(code, code, refusal)
        if not slot.meter.take(len(raw), kind):
            return 400, protocol.error_body(code, code, slot.meter.hit or "record limit")
        if kind == "step":
            slot.steps_taken += 1
        else:
            slot.resets_taken += 1
        t0 = time.monotonic()
        try:
            if kind == "reset":
                result = slot.episode.reset()
            else:
                result = slot.episode.step(tool, argument, arguments)
            observation, done = str(result.observation), bool(result.done)
            info = dict(result.info or {})
            json.dumps(info)  # what cannot travel to the harness is an environment bug
        except Exception as exc:  # the environment failed: never the harness's fault
            record.status, record.error = "env_error", clip_error(f"{type(exc).__name__}: {exc}")
            record.latency_s = time.monotonic() - t0
            slot.records.append(record)
            with rollout.cond:
                if rollout.ledger.infra_error is None:
                    rollout.ledger.infra_error = f"environment episode failed: {record.error}"
            return 502, protocol.error_body("server_error", "env_error", record.error)
        record.latency_s = time.monotonic() - t0
        record.observation, record.done, record.info = observation, done, info
        slot.meter.add(len(observation) + len(json.dumps(info, default=str)))
        if info.get("error"):
            record.status = "rejected"
        slot.done = slot.done or done
        slot.records.append(record)
    return 200, StepResult(observation, done, info).to_wire()
