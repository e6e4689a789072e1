"""The gold of a tau2 task as the agent's turns (``replay/tau2``), and tau2's own verdict on
the gold and on the empty conversation, computed without harnessctl (the reference the
replay is checked against: tests/test_tau2_replay.py, docs/tau2.md).

The replay script plays tau2's gold actions in order: an action of the agent
(``requestor: assistant``) as a call of that tool; an action of the user (``requestor:
user``, telecom's device actions) as a message asking the user to carry it out, naming the
tool (the scripted user then does, see :mod:`.user`); and last a closing message that states
every piece of information tau2 expects the agent to communicate (``communicate_info``) and,
when the gold transfers the user, says so. In solo mode (:mod:`.solo`) it plays every gold
action as the agent's tool call, then ``done`` (:func:`solo_replay_script`), checked against
tau2's verdict on the solo gold (:func:`reference_solo_simulation`).
"""

from __future__ import annotations

import json
from typing import Any

from harnessctl.envs import ReplayScript

from .package import new_environment, tau2

TRANSFER_TOOL = "transfer_to_human_agents"


def gold_actions(task: dict[str, Any]) -> list[dict[str, Any]]:
    """tau2's gold actions of a task (as JSON), in order."""
    criteria = task.get("evaluation_criteria") or {}
    return list(criteria.get("actions") or [])


def closing(task: dict[str, Any]) -> str:
    """The replay's last message: the information to communicate, a transfer when due."""
    criteria = task.get("evaluation_criteria") or {}
    info = [str(i) for i in criteria.get("communicate_info") or []]
    parts = ["Everything is done."]
    if info:
        parts.append("For your records: " + "; ".join(info) + ".")
    if any(a.get("name") == TRANSFER_TOOL for a in gold_actions(task)):
        parts.append("You are being transferred to a human agent.")
    return " ".join(parts)


def replay_script(task: dict[str, Any]) -> ReplayScript:
    """The gold as ``replay/tau2``'s script (see the module docstring)."""
    script: ReplayScript = []
    for action in gold_actions(task):
        name, arguments = str(action["name"]), dict(action.get("arguments") or {})
        if action.get("requestor", "assistant") == "user":
            text = f"Please do this on your phone: {name} {json.dumps(arguments)}."
            script.append({"text": text})
        else:
            text = f"I will now run {name} with {json.dumps(arguments)}."
            script.append({"text": text, "tool_call": {"name": name, "arguments": arguments}})
    script.append({"text": closing(task)})
    return script


def _initial_environment(domain: str, task: Any) -> Any:
    env = new_environment(domain)
    state = task.initial_state
    env.set_state(
        initialization_data=state.initialization_data if state is not None else None,
        initialization_actions=state.initialization_actions if state is not None else None,
        message_history=[],
    )
    return env


def reference_simulation(domain: str, task: Any, gold: bool) -> Any:
    """tau2's ``SimulationRun`` of the gold conversation (``gold``: every gold action as a
    tool call of its requestor, executed on the domain's environment, then the closing
    message; the agent stops) or of the empty one (no message; the agent stops)."""
    t = tau2()
    messages: list[Any] = []
    if gold:
        env = _initial_environment(domain, task)
        for n, action in enumerate(task.evaluation_criteria.actions or []):
            call = t.ToolCall(
                id=f"gold_{n}",
                name=action.name,
                arguments=json.loads(json.dumps(action.arguments)),
                requestor=action.requestor,
            )
            message_cls = t.UserMessage if action.requestor == "user" else t.AssistantMessage
            messages.append(message_cls(role=call.requestor, content=None, tool_calls=[call]))
            messages.append(env.get_response(call))
        text = closing(task.model_dump(mode="json")) + " ###STOP###"
        messages.append(t.AssistantMessage(role="assistant", content=text))
    return t.SimulationRun(
        id="reference",
        task_id=task.id,
        start_time="",
        end_time="",
        duration=0.0,
        termination_reason=t.TerminationReason.AGENT_STOP,
        messages=messages,
    )


# --- solo mode (docs/tau2.md "Solo mode") ----------------------------------------------------


def solo_replay_script(task: dict[str, Any]) -> ReplayScript:
    """The gold as ``replay/tau2``'s script in solo mode: every gold action as the agent's
    call of that tool (a user action too: tau2's solo agent holds the user's device tools),
    then tau2's stop tool ``done``. No closing message: a solo agent talks to no one."""
    from .solo import STOP_TOOL

    script: ReplayScript = []
    for action in gold_actions(task):
        name, arguments = str(action["name"]), dict(action.get("arguments") or {})
        text = f"I will now run {name} with {json.dumps(arguments)}."
        script.append({"text": text, "tool_call": {"name": name, "arguments": arguments}})
    script.append(
        {"text": "The ticket is resolved.", "tool_call": {"name": STOP_TOOL, "arguments": {}}}
    )
    return script


def reference_solo_simulation(domain: str, task: Any, gold: bool) -> Any:
    """tau2's ``SimulationRun`` of the solo gold (``gold``: every gold action as the agent's
    tool call on tau2's solo environment, then the stop message tau2's solo agent sends for
    ``done``) or of the empty solo run (the stop message only)."""
    from .solo import STOP_TOKEN

    t = tau2()
    messages: list[Any] = []
    if gold:
        env = t.registry.get_env_constructor(domain)(solo_mode=True)
        state = task.initial_state
        env.set_state(
            initialization_data=state.initialization_data if state is not None else None,
            initialization_actions=state.initialization_actions if state is not None else None,
            message_history=[],
        )
        for n, action in enumerate(task.evaluation_criteria.actions or []):
            call = t.ToolCall(
                id=f"gold_{n}",
                name=action.name,
                arguments=json.loads(json.dumps(action.arguments)),
                requestor="assistant",
            )
            messages.append(t.AssistantMessage(role="assistant", content=None, tool_calls=[call]))
            messages.append(env.get_response(call))
    messages.append(t.AssistantMessage(role="assistant", content=STOP_TOKEN))
    return t.SimulationRun(
        id="reference-solo",
        task_id=task.id,
        start_time="",
        end_time="",
        duration=0.0,
        termination_reason=t.TerminationReason.AGENT_STOP,
        messages=messages,
    )
