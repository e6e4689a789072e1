"""tau2-base: the plain tau2-bench agent, and nothing more.

The system prompt is the domain's policy document (``task.json``'s ``policy``); the domain's
tools are offered as functions exactly as the task gives them (``task.json``'s ``tools``); the
context is the user's first message and the whole conversation since. A reply with a function
call runs that tool (the first call of the reply); a reply with text only is a message to the
user (the environment's ``respond`` action), answered by the user's next message. The
conversation ends when the user (or tau2) ends it. Deliberately plain, so that repair
directions have something to fix: arguments are not checked against the schema, nothing asks
the user to confirm a change, a tool error is passed on as it is, the policy is stated once at
the top, and an empty reply ends the episode. Standard library and harnessctl_runtime only.
"""

from harnessctl_runtime import Action, Failure, Harness, Recovery, State

RESPOND = "respond"


class Tau2Harness(Harness):
    def system_prompt(self, state: State) -> str:
        return self.read_prompt("system.md").replace("{policy}", state.task.get("policy", ""))

    def task_message(self, state: State) -> str:
        return state.task.get("observation") or ""

    def build_context(self, state: State) -> list[dict]:
        messages = [
            {"role": "system", "content": self.system_prompt(state)},
            {"role": "user", "content": self.task_message(state)},
        ]
        return messages + self.history(state)

    def model_params(self, state: State) -> dict:
        # the task's own tool schemas, as given
        self.tool_specs = list(state.task.get("tools") or [])
        return super().model_params(state)

    def parse_action(self, reply: str, state: State) -> Action:
        calls = state.reply.tool_calls if state.reply is not None else []
        if calls:
            return self.parse_tool_call(calls[0], state)
        if reply.strip():
            return Action(kind="tool", tool=RESPOND, argument=reply.strip())
        return Action(kind="invalid", error="the reply has neither a tool call nor a message")

    def validate_action(self, action: Action, state: State) -> str | None:
        return None

    def recover(self, failure: Failure, state: State) -> Recovery:
        if failure.kind == "invalid_format":
            return Recovery("abort")
        return Recovery("continue")

    def should_stop(self, state: State) -> bool:
        return state.status is not None or state.round >= self.max_rounds

    def finalize(self, state: State) -> str | None:
        return state.answer
