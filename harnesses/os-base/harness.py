"""os-base: AgentBench's OS-interaction protocol, and nothing more.

Each reply thinks on a ``Think:`` line and takes one action: ``Act: bash`` with the command
in a ```bash block (sent to the environment's ``bash`` tool), ``Act: answer(<answer>)`` (the
final answer) or ``Act: finish`` (the ``finish`` tool: the system is changed as asked). The
output is shown as AgentBench shows it ("The output of the OS:" and the output, or "The
output of the OS is empty."). Deliberately plain so that repair directions have something to
fix: no validation of commands or answers, the exit status and a stopped command's reason
are not shown, a reply without an action ends the episode, and the last rounds are not
announced. Standard library and harnessctl_runtime only.
"""

import re

from harnessctl_runtime import Action, Failure, Harness, Observation, Recovery, State

BASH = re.compile(r"Act:\s*bash\s*```(?:bash|sh)?\s*\n(.*?)```", re.S | re.I)
ANSWER = re.compile(r"Act:\s*answer\((.*)\)", re.S | re.I)
FINISH = re.compile(r"Act:\s*finish\b", re.I)


class OSHarness(Harness):
    def system_prompt(self, state: State) -> str:
        return self.read_prompt("system.md")

    def build_context(self, state: State) -> list[dict]:
        messages = [
            {"role": "system", "content": self.system_prompt(state)},
            {"role": "user", "content": self.task_message(state)},
        ]
        return messages + self.history(state)

    def task_message(self, state: State) -> str:
        return "Now, I will start a new problem in a new OS. My problem is:\n\n" + (
            state.task.get("instruction", "")
        )

    def parse_action(self, reply: str, state: State) -> Action:
        bash = BASH.search(reply)
        if bash:
            return Action(kind="tool", tool="bash", argument=bash.group(1).strip())
        answer = ANSWER.search(reply)
        if answer:
            return Action(kind="answer", argument=answer.group(1).strip())
        if FINISH.search(reply):
            return Action(kind="tool", tool="finish", argument="")
        return Action(kind="invalid", error="no action (Act: bash, answer or finish) in the reply")

    def validate_action(self, action: Action, state: State) -> str | None:
        return None

    def show(self, observation: Observation) -> str:
        if not observation.text.strip():
            return "The output of the OS is empty."
        return "The output of the OS:\n\n" + observation.text

    def mediate_tool(self, action: Action, state: State) -> Observation:
        observation = self.tools[action.tool].run(action.argument, limit=self.observation_limit)
        if action.tool == "finish":
            return observation
        return Observation(
            text=self.show(observation),
            ok=observation.ok,
            payload=observation.payload,
            done=observation.done,
        )

    def recover(self, failure: Failure, state: State) -> Recovery:
        if failure.kind == "invalid_format":
            return Recovery("abort")
        return Recovery("continue")

    def should_stop(self, state: State) -> bool:
        return state.status is not None or state.round >= self.max_rounds

    def finalize(self, state: State) -> str | None:
        return state.answer
