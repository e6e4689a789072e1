"""dbbench-fc: AgentBench's function-calling DBBench protocol and nothing more.

The protocol of AgentBench's current DBBench task (configs/tasks/dbbench.yaml and
src/server/tasks/dbbench/task.py of THUDM/AgentBench's function-calling release, its main
branch since commit 5bf4eb2, 2025-10; Apache-2.0; v0.2's text protocol is dbbench-base): the
two functions below with the official names and parameter schemas, a system prompt that says
what the official one says, and the question after the table information, as the official
task phrases its user message.

Deliberately plain, like dbbench-base, so that repair directions have something to fix: the
context holds only the task text, calls are not validated, tool errors are shown as they
are, a reply with no function call ends the episode, and there is no warning before the
last round.
"""

import json

from harnessctl_runtime import Action, Failure, Harness, Observation, Recovery, State, function_tool

EXECUTE_SQL = function_tool(
    "execute_sql",
    "Executes a given SQL statement on the database and returns the result.",
    {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "The SQL query to be executed."}},
        "required": ["query"],
        "additionalProperties": False,
    },
)
COMMIT_FINAL_ANSWER = function_tool(
    "commit_final_answer",
    "Commits the final answer after all operations are completed.",
    {
        "type": "object",
        "properties": {
            "answers": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The list of final answers to commit.",
            }
        },
        "required": ["answers"],
        "additionalProperties": False,
    },
)


class DBBenchFCHarness(Harness):
    tool_specs = [EXECUTE_SQL, COMMIT_FINAL_ANSWER]
    answer_tool = "commit_final_answer"

    def system_prompt(self, state: State) -> str:
        return self.read_prompt("system.md")

    def task_message(self, state: State) -> str:
        context = state.task.get("context", "")
        question = f"Question: {state.task.get('instruction', '')}"
        if not context:
            return question
        return f"Additional table information about the question: {context}\n{question}"

    def build_context(self, state: State) -> list[dict]:
        # the system prompt, the question, then every call and its result (tool messages)
        messages = [
            {"role": "system", "content": self.system_prompt(state)},
            {"role": "user", "content": self.task_message(state)},
        ]
        return messages + self.history(state)

    def parse_action(self, reply: str, state: State) -> Action:
        calls = state.reply.tool_calls if state.reply is not None else []
        if not calls:
            return Action(kind="invalid", error="no function call in the reply")
        action = self.parse_tool_call(calls[0], state)
        if action.kind == "answer":
            # the scorer reads the answers as JSON: the list, or whatever was sent instead
            arguments = action.arguments or {}
            answers = arguments.get("answers", next(iter(arguments.values()), None))
            action.argument = json.dumps(answers, ensure_ascii=False)
        return action

    def validate_action(self, action: Action, state: State) -> str | None:
        return None  # calls go through as the model made them

    def mediate_tool(self, action: Action, state: State) -> Observation:
        # execute_sql(query): one statement on the task's database, the raw result back
        return self.tools["sql"].run(action.argument, limit=self.observation_limit)

    def recover(self, failure: Failure, state: State) -> Recovery:
        if failure.kind == "invalid_format":
            return Recovery("abort")
        return Recovery("continue")

    def should_stop(self, state: State) -> bool:
        return state.status is not None or state.round >= self.max_rounds

    def finalize(self, state: State) -> str | None:
        return state.answer
