"""``replay/os_interaction``: a TEST DOUBLE that answers every task with its gold.

It plays the environment's replay script (``OSEnvironment.replay``): the example script as
a ``bash`` command, then the answer. Where the gold answer is the example script's output in
the episode's own container (the check chain's expected value; an init script may draw it at
random), the generic ``replay/<kind>`` cannot know it beforehand: this policy reads it from
the observation the harness showed after the command (the last message, less a leading
"The output of the OS" line, stripped) and answers ``Act: answer(<output>)``.
"""

from __future__ import annotations

import re
from typing import Any

from harnessctl.policies.sim_signals import field_of, text_of

from .sim import episode_messages

_HEADER = re.compile(r"^\s*The output of the OS[^\n]*\n", re.I)


def _assistant_turns(messages: list[Any], description: str) -> int:
    """The policy's own replies: the assistant turns after the message that states the task
    (the harness's one-shot example before it is not the policy's)."""
    own = episode_messages(messages, description)
    return sum(1 for m in own if field_of(m, "role") == "assistant")


def last_output(messages: list[Any]) -> str:
    """The command output the harness showed last (see the module docstring)."""
    for message in reversed(messages or []):
        if field_of(message, "role") in ("user", "tool"):
            text = text_of(field_of(message, "content"))
            return _HEADER.sub("", text, count=1).strip()
    return ""


class ReplayOS:
    """``replay/os_interaction`` as an offline policy plugin."""

    description = "TEST DOUBLE: answers os_interaction tasks with the example scripts' output"
    version = "2"  # 2: the one-shot example turns are not its replies

    def param_names(self) -> tuple[str, ...]:
        """It reads no parameter of its own (checked before any rollout)."""
        return ()

    def view(self, env: Any, task: Any) -> dict[str, Any]:
        return {"replay": list(env.replay(task)), "description": env.oracle(task)["description"]}

    def reply(
        self,
        view: dict[str, Any],
        messages: list[Any],
        seed: int,
        params: dict[str, Any],
        tools: list[dict[str, Any]],
    ) -> str | dict[str, Any]:
        script = view["replay"]
        own = _assistant_turns(messages, str(view.get("description") or ""))
        step = script[min(own, len(script) - 1)]
        offered = {(t.get("function") or {}).get("name") for t in tools or []}
        call = step.get("tool_call")
        if call and call.get("name") in offered:
            return {"content": None, "tool_calls": [call]}
        text = str(step.get("text") or "")
        if step.get("answer_from_output"):
            text = text.replace("{output}", last_output(messages))
        return text
