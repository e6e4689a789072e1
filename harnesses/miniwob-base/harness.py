"""miniwob-base: the plain web-agent protocol, and nothing more.

The context is the task's instruction, the first page (the utterance and the page as text,
one element a line with its ref) and the whole history of replies and pages. Two protocols,
each with its own system prompt:

- text (the default, ``prompts/system.md``): each reply thinks on a ``Think:`` line and gives
  exactly one action on an ``Action:`` line: ``click [ref]``, ``type [ref] "text"`` or
  ``press <Key>``, sent to the environment's tool of that name;
- function calling (``settings.function_calling: true``, ``prompts/functions.md``): the three
  are offered as OpenAI functions and an action is a tool call of the reply, as that protocol
  has it; a reply without one is a format failure, whatever its text says (a call written as
  JSON text is not a call: reading it is a repair, ``call-in-text`` in the environment's
  ``format-validation`` direction).

Deliberately plain so that repair directions have something to fix: no validation (an
action the page refuses is answered only with the environment's error), no recovery (a
reply without an Action line, or without a call, ends the episode), no loop detection,
every page of the history kept in full. Standard library and harnessctl_runtime only.
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
        return self.read_prompt("functions.md" if self.tool_specs else "system.md")

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
        if self.tool_specs:  # function calling: an action is a tool call, never reply text
            return Action(kind="invalid", error="no function call in the reply")
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
