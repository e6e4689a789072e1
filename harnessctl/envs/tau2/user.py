"""The offline scripted user: a TEST DOUBLE of tau2's user simulator, not a model.

tau2-bench's user is an LLM role-playing the task's user scenario. Offline (the default:
``env_options: {user: scripted}``), this user stands in for it, deterministic and free, as a
subclass of tau2's own ``BaseUser``, so tau2's orchestrator runs it exactly as it runs its
LLM user. It follows these rules, and nothing else:

- its first message states the scenario's reason for calling and the information it knows
  (tau2's ``reason_for_call`` and ``known_info``; an unstructured scenario as it is written);
- when the agent's message names the next device action the scenario has the user carry out
  (the gold actions tau2 gives ``requestor: user``, in order; telecom), it carries that action
  out as a tool call of its own, then tells the agent what it saw;
- when the agent's message mentions a transfer, it answers tau2's ``###TRANSFER###``;
- when the agent's message asks something (holds a ``?``), it agrees: "Yes, please go ahead.";
- any other message from the agent ends the conversation (tau2's ``###STOP###``), as does its
  ``MAX_TURNS``-th reply.

It therefore confirms whatever is asked and never volunteers what the agent did not ask for:
enough to drive every domain end to end, nothing like a real customer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .package import tau2

_T = tau2()  # sets up the import of tau2 (quiet, no network); then its classes:
from tau2.user.base import BaseUser  # noqa: E402
from tau2.user.user_simulator import UserSimulator  # noqa: E402
from tau2.utils.llm_utils import to_litellm_messages  # noqa: E402

#: One model call on the rollout's recording path: OpenAI-shaped ``messages`` and ``tools``
#: (None: none) in; ``{"content": str | None, "tool_calls": [{"id", "name", "arguments":
#: dict}], "cost": float}`` out.
CompleteFn = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], dict[str, Any]]

#: Replies after which the scripted user ends the conversation whatever the agent says.
MAX_TURNS = 30
AGREE = "Yes, please go ahead."
THANKS = "Thank you, that is all I needed."


def opening(scenario: Any) -> str:
    """The scripted user's first message, from tau2's user scenario."""
    instructions = getattr(scenario, "instructions", None)
    if isinstance(instructions, str):
        return instructions.strip()
    parts = [getattr(instructions, "reason_for_call", ""), getattr(instructions, "known_info", "")]
    return "\n".join(str(p).strip() for p in parts if p) or "I need some help."


class ScriptedUser(BaseUser):
    """tau2's ``BaseUser`` played by the rules in the module docstring (one per episode)."""

    def __init__(self, task: Any, environment: Any = None) -> None:
        super().__init__(instructions=str(task.user_scenario), llm=None)
        self.first = opening(task.user_scenario)
        actions = (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []
        self.pending = [a for a in actions if a.requestor == "user"]
        self.turns = 0
        self.calls = 0

    def get_init_state(self, message_history: list[Any] | None = None) -> Any:
        return _T.UserState(system_messages=[], messages=list(message_history or []))

    @classmethod
    def is_stop(cls, message: Any) -> bool:
        if message.is_tool_call():
            return False
        text = message.content or ""
        return _T.STOP in text or _T.TRANSFER in text

    def set_seed(self, seed: int) -> None:
        """Deterministic: the seed changes nothing."""

    def stop(self, message: Any = None, state: Any = None) -> None:
        """Nothing to release."""

    def _say(self, text: str) -> Any:
        return _T.UserMessage(role="user", content=text)

    def generate_next_message(self, message: Any, state: Any) -> tuple[Any, Any]:
        results = getattr(message, "tool_messages", None)
        if results is not None or isinstance(message, _T.ToolMessage):
            state.messages.extend(results or [message])
            seen = "; ".join(str(m.content) for m in (results or [message]))
            reply = self._say(f"I did that. It shows: {seen[:600]}")
        else:
            state.messages.append(message)
            reply = self._answer(str(message.content or ""))
        self.turns += 1
        state.messages.append(reply)
        return reply, state

    def _answer(self, text: str) -> Any:
        if self.turns == 0:
            return self._say(self.first)
        for index, action in enumerate(self.pending):
            if action.name in text:
                del self.pending[index]
                self.calls += 1
                call = _T.ToolCall(
                    id=f"user_call_{self.calls}",
                    name=action.name,
                    arguments=json.loads(json.dumps(action.arguments)),
                    requestor="user",
                )
                return _T.UserMessage(role="user", content=None, tool_calls=[call])
        if self.turns >= MAX_TURNS:
            return self._say(f"{THANKS} {_T.STOP}")
        if "transfer" in text.lower():
            return self._say(_T.TRANSFER)
        if "?" in text:
            return self._say(AGREE)
        return self._say(f"{THANKS} {_T.STOP}")


class ModelUser(UserSimulator):
    """tau2's own LLM user (``UserSimulator``: tau2's simulation guidelines and the task's
    scenario as the system prompt, the conversation with roles flipped, the user's device tools
    in telecom, built as tau2's ``run`` builds it) whose one model call goes through
    ``complete`` instead of tau2's direct litellm call: the episode's side of the model-access
    hook (docs/tau2.md). ``env_options: {user: <litellm model>}`` binds ``complete`` to the
    episode's ``models`` (:func:`harnessctl.envs.tau2.model_user`): the calls are recorded as
    ``env:user``, outside the agent's budget."""

    def __init__(self, task: Any, environment: Any, complete: CompleteFn) -> None:
        tools = environment.get_user_tools() if environment.user_tools is not None else None
        super().__init__(tools=tools, instructions=str(task.user_scenario), llm="harnessctl")
        self.complete = complete

    def _generate_next_message(self, message: Any, state: Any) -> tuple[Any, Any]:
        results = getattr(message, "tool_messages", None)
        state.messages.extend(results if results is not None else [message])
        messages = to_litellm_messages(state.system_messages + state.flip_roles())
        tools = [tool.openai_schema for tool in self.tools] if self.tools else None
        reply = self.complete(messages, tools)
        calls = [
            _T.ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"], requestor="user")
            for c in reply.get("tool_calls") or []
        ]
        user_message = _T.UserMessage(
            role="user",
            content=reply.get("content"),
            tool_calls=calls or None,
            cost=reply.get("cost"),
        )
        state.messages.append(user_message)
        return user_message, state
