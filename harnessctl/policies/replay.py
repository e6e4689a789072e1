"""``replay/<kind>``: a TEST DOUBLE that answers every task with its gold.

The environment says what its gold looks like as actions (``env.replay(task)``: a list of
steps, each ``{"text": reply in the text protocol, "tool_call": {"name", "arguments"}}``);
the policy plays step ``i`` at the model call that follows ``i`` assistant turns. When the
request offers ``tools`` and the step has a matching ``tool_call``, it answers with that
function call, otherwise with the text. It exists so anyone can check an environment end to
end (loading, the harness's protocol, the action surface, scoring): a correct environment and
harness score every task a success.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError


def _assistant_turns(messages: list[Any]) -> int:
    return sum(1 for m in messages or [] if isinstance(m, dict) and m.get("role") == "assistant")


class ReplayPolicy:
    description = "TEST DOUBLE: answers with the gold of the environment"
    version = "1"  # the replay rule; the script itself is the environment's (its version)

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def view(self, env: Any, task: Any) -> dict[str, Any]:
        if env.kind != self.kind:
            raise ConfigError("--policy", f"replay/{self.kind} cannot play {env.kind} tasks")
        script = env.replay(task)
        if script is None:
            raise ConfigError("--policy", f"environment {env.kind!r} has no replay(task) script")
        return {"replay": list(script)}

    def reply(
        self,
        view: dict[str, Any],
        messages: list[Any],
        seed: int,
        params: dict[str, Any],
        tools: list[dict[str, Any]],
    ) -> str | dict[str, Any]:
        script = view["replay"]
        if not script:
            return ""
        step = script[min(_assistant_turns(messages), len(script) - 1)]
        offered = {
            (t.get("function") or {}).get("name") for t in tools or [] if isinstance(t, dict)
        }
        call = step.get("tool_call")
        if call and call.get("name") in offered:
            return {"content": None, "tool_calls": [call]}
        return str(step.get("text") or "")
