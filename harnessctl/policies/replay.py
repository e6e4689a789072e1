"""``replay/<kind>``: a TEST DOUBLE that answers every task with its gold.

The environment says what its gold looks like as actions (``env.replay(task)``: a list of
steps, each ``{"text": reply in the text protocol, "tool_call": {"name", "arguments"}}``);
the policy plays step ``i`` at the model call that follows ``i`` of its own replies (assistant
turns the harness wrote itself, such as in-context examples, do not count). When the
request offers ``tools`` and the step has a matching ``tool_call``, it answers with that
function call, otherwise with the text. It exists so anyone can check an environment end to
end (loading, the harness's protocol, the action surface, scoring): a correct environment and
harness score every task a success.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError


def _own_turns(messages: list[Any], script: list[dict[str, Any]]) -> int:
    """How many of the assistant messages are this policy's own replies: those that make
    function calls or say a step's text. An agent turn the harness wrote itself (an in-context
    example, the "Ok." that AgentBench's DBBench protocol injects) is not one."""
    texts = {str(step.get("text") or "") for step in script}
    return sum(
        1
        for m in messages or []
        if isinstance(m, dict)
        and m.get("role") == "assistant"
        and (m.get("tool_calls") or str(m.get("content") or "") in texts)
    )


class ReplayPolicy:
    description = "TEST DOUBLE: answers with the gold of the environment"
    version = "2"  # the replay rule (2: own replies counted); the script is the environment's

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def param_names(self) -> tuple[str, ...]:
        """It reads no parameter of its own (checked before any rollout)."""
        return ()

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
        step = script[min(_own_turns(messages, script), len(script) - 1)]
        offered = {
            (t.get("function") or {}).get("name") for t in tools or [] if isinstance(t, dict)
        }
        call = step.get("tool_call")
        if call and call.get("name") in offered:
            return {"content": None, "tool_calls": [call]}
        return str(step.get("text") or "")
