"""dbbench-paraphrase: the DBBench text protocol in the project's own words.

An alternative to dbbench-base (AgentBench's text, verbatim): the same two actions, asked
for by a system prompt written here (prompts/system.md) and read by a lenient parser. It was
the project's base before the base became AgentBench's text; on small local models its
wording makes fewer format failures, so it lives on, named, as a base of its own lineage.

Deliberately plain so that repair directions have something to fix: the context holds only
the task text, actions are not validated, tool errors are shown as they are, an unparsable
reply ends the episode, and there is no warning before the last round.
"""

import re

from harnessctl_runtime import Action, Failure, Harness, Observation, Recovery, State

SQL_BLOCK = re.compile(r"```sql\s*\n?(.*?)```", re.S | re.I)
FINAL_ANSWER = re.compile(r"Final Answer:(.*)", re.S)


class DBBenchHarness(Harness):
    def system_prompt(self, state: State) -> str:
        return self.read_prompt("system.md")

    def build_context(self, state: State) -> list[dict]:
        messages = [
            {"role": "system", "content": self.system_prompt(state)},
            {"role": "user", "content": self.task_message(state)},
        ]
        return messages + self.history(state)

    def parse_action(self, reply: str, state: State) -> Action:
        sql = SQL_BLOCK.search(reply)
        answer = FINAL_ANSWER.search(reply)
        if sql and (answer is None or sql.start() < answer.start()):
            return Action(kind="tool", tool="sql", argument=sql.group(1).strip())
        if answer:
            return Action(kind="answer", argument=answer.group(1).strip())
        return Action(kind="invalid", error="no SQL block and no Final Answer")

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
