"""dbbench-base: AgentBench v0.2's DBBench text protocol, verbatim, and nothing more.

The conversation of AgentBench's DBBench task (THUDM/AgentBench, v0.2,
``src/server/tasks/dbbench/__init__.py``; Apache-2.0, see README.md): its instructions
(``big_prompt``, ``prompts/big_prompt.md`` byte for byte) as the first user message, the agent
turn "Ok." it injects, then the question (the description, a newline, the additional
description). Replies are read as AgentBench reads them: the first ``Action: ...`` line;
``Operation`` runs the first ```sql block (newlines made spaces), and an Operation without one
is a format failure; any other action, or none, must carry ``Final Answer:`` after a newline
(the rest of that line is the answer), else a format failure. AgentBench executes at most 15
operations and reads the reply after the 15th for an answer: 16 model calls.

Deliberately plain so that repair directions have something to fix: no schema in the context,
no validation, tool errors shown as they are, an unparsable reply ends the episode, and there
is no warning before the last round. Standard library and harnessctl_runtime only.
"""

import re

from harnessctl_runtime import Action, Failure, Harness, Observation, Recovery, State

ACTION = re.compile(r"Action: (.*?)\n")  # AgentBench's three patterns, as written there
SQL_BLOCK = re.compile(r"```sql\n([\s\S]*?)\n```")
FINAL_ANSWER = re.compile(r"\nFinal Answer:(.*)")
ACKNOWLEDGEMENT = "Ok."  # the agent turn AgentBench injects after its instructions


class DBBenchHarness(Harness):
    def system_prompt(self, state: State) -> str:
        # AgentBench sends its instructions as a user message, not a system message
        return self.read_prompt("big_prompt.md")

    def build_context(self, state: State) -> list[dict]:
        messages = [
            {"role": "user", "content": self.system_prompt(state)},
            {"role": "assistant", "content": ACKNOWLEDGEMENT},
            {"role": "user", "content": self.task_message(state)},
        ]
        return messages + self.history(state)

    def task_message(self, state: State) -> str:
        return state.task.get("instruction", "") + "\n" + state.task.get("context", "")

    def parse_action(self, reply: str, state: State) -> Action:
        action = ACTION.search(reply)
        if action and action.group(1) == "Operation":
            sql = SQL_BLOCK.search(reply)
            if sql is None:
                return Action(kind="invalid", error="Action: Operation without a ```sql block")
            statement = sql.group(1).strip().replace("\n", " ")
            return Action(kind="tool", tool="sql", argument=statement)
        answer = FINAL_ANSWER.search(reply)
        if answer:  # stripped: the scorer reads the answer stripped, as AgentBench's eval() did
            return Action(kind="answer", argument=answer.group(1).strip())
        return Action(kind="invalid", error="no Action: Operation and no Final Answer")

    def validate_action(self, action: Action, state: State) -> str | None:
        return None

    def mediate_tool(self, action: Action, state: State) -> Observation:
        return self.tools["sql"].run(action.argument, limit=self.observation_limit)

    def recover(self, failure: Failure, state: State) -> Recovery:
        if failure.kind == "invalid_format":
            return Recovery("abort")
        return Recovery("continue")

    def should_stop(self, state: State) -> bool:
        return state.status is not None or state.round >= self.max_rounds

    def finalize(self, state: State) -> str | None:
        return state.answer
