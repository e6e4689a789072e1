"""alfworld-base: the plain ALFWorld protocol the papers start from, and nothing more.

The context is the task (the game's first observation, which ends with the goal) and the
whole history of replies and observations. Each reply thinks on a ``Think:`` line and gives
exactly one game command on an ``Action:`` line, sent to the game's ``act`` tool. Deliberately
plain so that repair directions have something to fix: no admissible-command list in the
context, no validation (a command the game does not accept is answered only with its own
"Nothing happens."), no recovery (a reply without an Action line ends the episode), no loop
detection, no history compaction. Standard library and harnessctl_runtime only.
"""

import re

from harnessctl_runtime import Action, Failure, Harness, Observation, Recovery, State

ACTION = re.compile(r"^\s*Action:\s*(.+?)\s*$", re.M)


class AlfworldHarness(Harness):
    def system_prompt(self, state: State) -> str:
        return self.read_prompt("system.md")

    def task_message(self, state: State) -> str:
        return state.task.get("observation") or state.task.get("instruction", "")

    def build_context(self, state: State) -> list[dict]:
        messages = [
            {"role": "system", "content": self.system_prompt(state)},
            {"role": "user", "content": self.task_message(state)},
        ]
        return messages + self.history(state)

    def parse_action(self, reply: str, state: State) -> Action:
        match = ACTION.search(reply)
        if match is None:
            return Action(kind="invalid", error="no Action line in the reply")
        return Action(kind="tool", tool="act", argument=match.group(1))

    def validate_action(self, action: Action, state: State) -> str | None:
        return None

    def mediate_tool(self, action: Action, state: State) -> Observation:
        return self.tools["act"].run(action.argument, limit=self.observation_limit)

    def recover(self, failure: Failure, state: State) -> Recovery:
        if failure.kind == "invalid_format":
            return Recovery("abort")
        return Recovery("continue")

    def should_stop(self, state: State) -> bool:
        return state.status is not None or state.round >= self.max_rounds

    def finalize(self, state: State) -> str | None:
        return state.answer
