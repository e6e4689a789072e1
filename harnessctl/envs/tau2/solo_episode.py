"""One solo-mode episode (see :mod:`.solo`): tau2's orchestrator in ``solo_mode`` with the
harness in tau2's solo agent's seat and tau2's ``DummyUser``.

The harness's steps are as in :mod:`.episode`, with tau2's solo rules: a tool call (of the
agent's tools, the user's device tools or ``done``) is the agent's next message; ``done``
becomes tau2's stop message, as tau2's ``LLMSoloAgent`` turns it into one, and ends the
episode (``agent_stop``), as does a message holding the stop token. Any other message is
refused with an observation (:data:`.solo.NO_USER`) and reaches no one: tau2's solo agent
cannot write one (it calls its model with ``tool_choice="required"``). The reset's
observation is tau2's solo instruction and the ticket; tau2's conversation starts with the
harness's first action (tau2's solo orchestrator asks the agent first).
"""

from __future__ import annotations

import json
from typing import Any

from harnessctl.envs import StepResult, Task

from .episode import MAX_ERRORS, MAX_MESSAGES, Tau2Episode, agent_message
from .package import RESPOND, tau2
from .solo import NO_USER, STOP_TOKEN, _tau2_task, instruction, opening

_T = tau2()  # sets up the import of tau2 (quiet, no network); then its classes:
from tau2.agent.llm_agent import LLMSoloAgent  # noqa: E402
from tau2.user.user_simulator import DummyUser  # noqa: E402


class HarnessSoloAgent(LLMSoloAgent):
    """tau2's solo agent seat (its tools, ``done``, its stop rules), taken by the harness."""

    def __init__(self, tools: list[Any], domain_policy: str, task: Any) -> None:
        super().__init__(tools=tools, domain_policy=domain_policy, task=task, llm=None)
        self.pending: Any = None

    def get_init_state(self, message_history: list[Any] | None = None) -> Any:
        return None

    def generate_next_message(self, message: Any, state: Any) -> tuple[Any, Any]:
        pending, self.pending = self.pending, None
        if pending is None:  # the orchestrator asked for the agent's turn out of order
            raise RuntimeError("tau2 asked the agent to act with no message from the harness")
        if pending.is_tool_call():
            pending = self._check_if_stop_toolcall(pending)  # tau2's: `done` -> stop message
        return pending, state

    def set_seed(self, seed: int) -> None:
        """Nothing to seed: the harness answers."""


def solo_environment(domain: str) -> Any:
    """tau2's domain environment in solo mode (``environment_constructor(solo_mode=True)``),
    its tools that run their arguments as code bounded (:mod:`.guard`)."""
    from .guard import guard_tools

    return guard_tools(_T.registry.get_env_constructor(domain)(solo_mode=True))


def solo_agent(domain: str, task: Any, environment: Any = None) -> HarnessSoloAgent:
    """The solo agent seat of ``task``, with the tools tau2's ``run`` gives its solo agent
    (the environment's tools and its user tools; the agent adds ``done``)."""
    environment = environment if environment is not None else solo_environment(domain)
    user_tools = environment.get_user_tools() if environment.user_tools else []
    return HarnessSoloAgent(environment.get_tools() + user_tools, environment.get_policy(), task)


class Tau2SoloEpisode(Tau2Episode):
    """One solo-mode episode of one tau2 task (see the module docstring); host only."""

    solo_mode = True

    def __init__(self, domain: str, task: Any) -> None:
        super().__init__(domain, task, None)
        self.started_conversation = False

    def reset(self) -> StepResult:
        self.calls = 0
        self.started_conversation = False
        self.started = _now()
        environment = solo_environment(self.domain)
        agent = solo_agent(self.domain, self.task, environment)
        self.agent = agent  # the solo seat: a pending message, as HarnessAgent
        user_tools = environment.get_user_tools() if environment.user_tools else None
        user = DummyUser(tools=user_tools, instructions=str(self.task.user_scenario), llm=None)
        self.orchestrator = _T.Orchestrator(
            domain=self.domain,
            agent=agent,
            user=user,
            environment=environment,
            task=self.task,
            max_steps=MAX_MESSAGES,
            max_errors=MAX_ERRORS,
            solo_mode=True,
        )
        return StepResult(opening(str(self.task.ticket or "")), info={"from": "ticket"})

    def step(self, tool: str, argument: str, arguments: dict[str, Any] | None) -> StepResult:
        if self.orchestrator is None:
            self.reset()
        if self.done:
            return self._observe()
        self.calls += 1
        if tool == RESPOND:
            text = arguments.get("content", "") if arguments is not None else argument
            if not isinstance(text, str) or STOP_TOKEN not in text:
                return StepResult(NO_USER, info={"error": NO_USER, "from": "host"})
        try:
            message = agent_message(tool, argument, arguments, self.calls)
        except ValueError as exc:
            return StepResult(str(exc), info={"error": str(exc), "from": "host"})
        assert self.agent is not None
        self.agent.pending = message
        if not self.started_conversation:  # tau2's solo orchestrator asks the agent first
            self.started_conversation = True
            self.orchestrator.initialize()
        self._run_to_agent()
        return self._observe()

    def _observe(self) -> StepResult:
        result = super()._observe()
        if self.orchestrator.message.role == "assistant":  # the agent's own stop message
            result.info["from"] = "host"
        return result


def _now() -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%S")


def public_task(task: Task, base: dict[str, Any]) -> dict[str, Any]:
    """``task.json`` in solo mode: ``base`` (id, env, domain) with tau2's solo instruction,
    the domain's solo policy, the ticket and the solo agent's tools (the agent's, the
    user's, ``done``), as tau2's ``LLMSoloAgent`` has them; no gold."""
    agent = solo_agent(str(task.record["domain"]), _tau2_task(task))
    tools = [json.loads(json.dumps(t.openai_schema)) for t in agent.tools]
    return {
        **base,
        "mode": "solo",
        "instruction": instruction(),
        "policy": agent.domain_policy,
        "ticket": str(task.record["task"].get("ticket") or ""),
        "tools": tools,
    }
