"""One tau2-bench conversation per rollout, run by tau2's own orchestrator on the host.

The harness is tau2's agent: each step it sends is the agent's next message, either a tool
call of the domain's agent tools (``tool`` = the tool's name, ``arguments`` = its JSON
arguments) or a message to the user (``tool`` = ``respond``, ``argument`` = the text). The
episode hands it to tau2's ``Orchestrator`` through a stand-in agent (:class:`HarnessAgent`)
and runs the orchestrator until the agent is to speak again: the tool's result (executed by
tau2's domain environment), or the user's answer (after any tool calls the user makes). The
observation is that text; the episode is ``done`` when tau2's conversation ends (the user
stops or transfers, the agent says ``###STOP###``, tau2's step or error limits). Scoring is
tau2's ``evaluate_simulation`` on the conversation (:func:`evaluate`).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from harnessctl.envs import Episode, StepResult

from .judge import JudgeError, judged_by, verdicts
from .package import RESPOND, new_environment, tau2

_T = tau2()  # sets up the import of tau2 (quiet, no network); then its base class:
from tau2.agent.base import BaseAgent  # noqa: E402

#: tau2's defaults: orchestrator steps (messages of all roles) and tool errors per conversation.
MAX_MESSAGES = 200
MAX_ERRORS = 10
ENDED = {"agent_stop", "user_stop"}


class HarnessAgent(BaseAgent):
    """tau2's agent seat, taken by the harness: answers with the message the harness sent."""

    STOP_TOKEN = "###STOP###"

    def __init__(self) -> None:
        self.pending: Any = None

    def get_init_state(self, message_history: list[Any] | None = None) -> Any:
        return None

    def generate_next_message(self, message: Any, state: Any) -> tuple[Any, Any]:
        pending, self.pending = self.pending, None
        if pending is None:  # the orchestrator asked for the agent's turn out of order
            raise RuntimeError("tau2 asked the agent to speak with no message from the harness")
        return pending, state

    def stop(self, message: Any = None, state: Any = None) -> None:
        """Nothing to release."""

    @classmethod
    def is_stop(cls, message: Any) -> bool:
        return bool(message.content) and cls.STOP_TOKEN in message.content


def agent_message(tool: str, argument: str, arguments: dict[str, Any] | None, n: int) -> Any:
    """The agent's message for one step of the harness; ``ValueError`` when malformed."""
    if tool == RESPOND:
        text = arguments.get("content", "") if arguments is not None else argument
        if not isinstance(text, str) or not text.strip():
            raise ValueError("respond takes the text of the message to the user")
        return _T.AssistantMessage(role="assistant", content=text)
    if arguments is None:
        try:
            arguments = json.loads(argument) if argument.strip() else {}
        except ValueError:
            raise ValueError(f"the arguments of {tool} must be a JSON object") from None
    if not isinstance(arguments, dict):
        raise ValueError(f"the arguments of {tool} must be a JSON object")
    call = _T.ToolCall(id=f"call_{n}", name=tool, arguments=arguments, requestor="assistant")
    return _T.AssistantMessage(role="assistant", content=None, tool_calls=[call])


class Tau2Episode(Episode):
    """One conversation of one tau2 task (see the module docstring); host only."""

    #: tau2's solo mode (:class:`.solo_episode.Tau2SoloEpisode`): scored with ``solo_mode``.
    solo_mode = False

    def __init__(self, domain: str, task: Any, user_factory: Any) -> None:
        """``user_factory(task, environment)``: the user for a conversation (a tau2 user)."""
        self.domain = domain
        self.task = task  # tau2's Task, gold included: never sent to the harness
        self.user_factory = user_factory
        self.orchestrator: Any = None
        self.agent: HarnessAgent | None = None
        self.calls = 0
        self.started = ""

    @property
    def done(self) -> bool:
        return bool(self.orchestrator is not None and self.orchestrator.done)

    def _run_to_agent(self) -> None:
        """Run tau2's orchestrator until the agent is to speak or the conversation ended,
        checking tau2's limits as its ``Orchestrator.run`` does."""
        orch, agent = self.orchestrator, self.agent
        assert agent is not None, "reset() first"
        while not orch.done and not (orch.to_role.value == "agent" and agent.pending is None):
            orch.step()
            if orch.to_role.value == "env":
                continue
            if orch.step_count >= orch.max_steps:
                orch.done, orch.termination_reason = True, _T.TerminationReason.MAX_STEPS
            if orch.num_errors >= orch.max_errors:
                orch.done, orch.termination_reason = True, _T.TerminationReason.TOO_MANY_ERRORS

    def _observe(self) -> StepResult:
        message = self.orchestrator.message
        info: dict[str, Any] = {}
        if getattr(message, "tool_messages", None) is not None:
            text = "\n".join(str(m.content) for m in message.tool_messages)
        else:
            text = str(message.content or "")
        if message.role == "tool":
            info["from"] = "tool"
            if getattr(message, "error", False):
                info["error"] = text[:500]
        else:
            info["from"] = "user"
        if self.done:
            reason = self.orchestrator.termination_reason.value
            info["termination"] = reason
            if reason == "max_steps":
                info["truncated"] = True
        return StepResult(text, done=self.done, info=info)

    def reset(self) -> StepResult:
        self.agent = HarnessAgent()
        self.calls = 0
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S")
        environment = new_environment(self.domain)
        self.orchestrator = _T.Orchestrator(
            domain=self.domain,
            agent=self.agent,
            user=self.user_factory(self.task, environment),
            environment=environment,
            task=self.task,
            max_steps=MAX_MESSAGES,
            max_errors=MAX_ERRORS,
        )
        self.orchestrator.initialize()
        self._run_to_agent()
        return self._observe()

    def step(self, tool: str, argument: str, arguments: dict[str, Any] | None) -> StepResult:
        if self.orchestrator is None:
            self.reset()
        if self.done:
            return self._observe()
        self.calls += 1
        try:
            message = agent_message(tool, argument, arguments, self.calls)
        except ValueError as exc:
            return StepResult(str(exc), info={"error": str(exc), "from": "host"})
        assert self.agent is not None
        self.agent.pending = message
        self._run_to_agent()
        return self._observe()

    def simulation(self) -> Any:
        """The conversation as tau2's ``SimulationRun``; a conversation the harness left
        before tau2 ended it counts as tau2's ``max_steps`` (it did not finish)."""
        orch = self.orchestrator
        messages = orch.get_trajectory() if orch is not None else []
        reason = orch.termination_reason if orch is not None and orch.done else None
        return _T.SimulationRun(
            id=str(uuid.uuid4()),
            task_id=self.task.id,
            start_time=self.started or "",
            end_time=time.strftime("%Y-%m-%dT%H:%M:%S"),
            duration=0.0,
            termination_reason=reason or _T.TerminationReason.MAX_STEPS,
            messages=messages,
        )


def evaluate(
    domain: str,
    task: Any,
    simulation: Any,
    judge: Callable[[list[Any]], Any] | None = None,
    *,
    solo_mode: bool = False,
) -> dict[str, Any]:
    """tau2's own ``evaluate_simulation`` (database, gold actions, communicated information)
    as a plain dict: reward, basis, breakdown, termination. With a ``judge``
    (:mod:`.judge`), tau2's ``ALL_WITH_NL_ASSERTIONS``: the task's natural-language
    assertions are judged too (their verdicts in ``nl_assertions``), and count in the reward
    where the task's reward basis holds ``NL_ASSERTION``, by tau2's rule; without one,
    tau2's ``ALL``, and a task whose basis holds it cannot be scored (``ValueError``).
    ``solo_mode``: tau2's solo-mode scoring (the agent's calls of user tools replayed on the
    user's device)."""
    criteria = task.evaluation_criteria
    basis = {str(getattr(b, "value", b)) for b in (criteria.reward_basis if criteria else [])}
    if judge is None and "NL_ASSERTION" in basis:
        raise ValueError(
            f"tau2 task {task.id}: its reward basis holds NL_ASSERTION, which only a judge "
            "model scores: give one (env_options: judge: <litellm model>)"
        )
    kind = _T.EvaluationType.ALL if judge is None else _T.EvaluationType.ALL_WITH_NL_ASSERTIONS
    with judged_by(judge) if judge is not None else contextlib.nullcontext():
        try:
            info = _T.evaluate_simulation(
                simulation=simulation,
                task=task,
                evaluation_type=kind,
                solo_mode=solo_mode,
                domain=domain,
            )
        except (ValueError, KeyError, TypeError) as exc:
            if judge is None:
                raise
            raise JudgeError(
                f"the judge model's answer is not the verdicts tau2 asks for: "
                f"{type(exc).__name__}: {str(exc)[:300]}"
            ) from None
    breakdown = {str(getattr(k, "value", k)): v for k, v in (info.reward_breakdown or {}).items()}
    reason = simulation.termination_reason
    detail = {
        "reward": float(info.reward),
        "reward_basis": [str(getattr(b, "value", b)) for b in info.reward_basis or []],
        "breakdown": breakdown,
        "db_match": info.db_check.db_match if info.db_check is not None else None,
        "termination": str(getattr(reason, "value", reason)),
    }
    if judge is not None and info.nl_assertions is not None:
        asked = len(criteria.nl_assertions or []) if criteria else 0
        if asked and len(info.nl_assertions) != asked:  # tau2 would count none as all met
            raise JudgeError(
                f"the judge model gave {len(info.nl_assertions)} verdict(s) for {asked} "
                "natural-language assertion(s)"
            )
        detail["nl_assertions"] = verdicts(info.nl_assertions)
    return detail
