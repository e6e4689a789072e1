"""miniwob-base: the plain web-agent protocol, and nothing more.

The context is the task's instruction, the first page (the utterance and the page as text,
one element a line with its ref) and the whole history of replies and pages. Each reply
thinks on a ``Think:`` line and gives exactly one action on an ``Action:`` line: ``click
[ref]``, ``type [ref] "text"`` or ``press <Key>``, sent to the environment's tool of that
name (with ``settings.function_calling`` the three are offered as functions instead).
Deliberately plain so that repair directions have something to fix: no validation (an
action the page refuses is answered only with the environment's error), no recovery (a
reply without an Action line ends the episode), no loop detection, every page of the
history kept in full. Standard library and harnessctl_runtime only.
"""

import re

from harnessctl_runtime import Action, Failure, Harness, Observation, Recovery, State, function_tool

ACTION = re.compile(r"^\s*Action:\s*(.+?)\s*$", re.M)
VERBS = ("click", "type", "press")
REF = {"type": "integer", "description": "the element's ref, the number in [ ] on the page"}
FUNCTIONS = [
    function_tool("click", "Click an element of the page.", {
        "type": "object", "properties": {"ref": REF}, "required": ["ref"],
    }),
    function_tool("type", "Click an element of the page, then type text into it.", {
        "type": "object",
        "properties": {"ref": REF, "text": {"type": "string", "description": "the text to type"}},
        "required": ["ref", "text"],
    }),
    function_tool("press", "Press a key or a key combination (<Enter>, C-a...).", {
        "type": "object",
        "properties": {"key": {"type": "string", "description": "e.g. <Enter>, <Tab>, C-a"}},
        "required": ["key"],
    }),
]  # fmt: skip


class MiniwobHarness(Harness):
    def __init__(self, harness_dir, task_dir, settings=None):
        super().__init__(harness_dir, task_dir, settings)
        if self.settings.get("function_calling"):
            self.tool_specs = list(FUNCTIONS)

    def system_prompt(self, state: State) -> str:
        return self.read_prompt("system.md")

    def task_message(self, state: State) -> str:
        return f"{state.task.get('instruction', '')}\n\n{state.task.get('observation', '')}"

    def build_context(self, state: State) -> list[dict]:
        messages = [
            {"role": "system", "content": self.system_prompt(state)},
            {"role": "user", "content": self.task_message(state)},
        ]
        return messages + self.history(state)

    def parse_action(self, reply: str, state: State) -> Action:
        calls = state.reply.tool_calls if state.reply is not None else []
        if calls:
            return self.parse_tool_call(calls[0], state)
        match = ACTION.search(reply)
        if match is None:
            return Action(kind="invalid", error="no Action line in the reply")
        verb, _, argument = match.group(1).partition(" ")
        if verb.lower() not in VERBS:
            return Action(
                kind="invalid", error=f"unknown action {verb!r}: use click, type or press"
            )
        return Action(kind="tool", tool=verb.lower(), argument=argument.strip())

    def validate_action(self, action: Action, state: State) -> str | None:
        return None

    def mediate_tool(self, action: Action, state: State) -> Observation:
        return super().mediate_tool(action, state)

    def recover(self, failure: Failure, state: State) -> Recovery:
        if failure.kind == "invalid_format":
            return Recovery("abort")
        return Recovery("continue")

    def should_stop(self, state: State) -> bool:
        return state.status is not None or state.round >= self.max_rounds

    def finalize(self, state: State) -> str | None:
        return state.answer
