"""os-base: AgentBench v0.2's OS-interaction protocol, verbatim, and nothing more.

The conversation of AgentBench's OS task (THUDM/AgentBench, v0.2,
``src/server/tasks/os_interaction/task.py``; Apache-2.0, see README.md), always in its one-shot
form: the instructions (``prompts/instructions.md``, byte for byte) and the example problem as
the first user message, the example's turns (``prompts/one_shot.json``: how many files are in
/etc, ``Act: answer(220)``), then "Now, I will start a new problem in a new OS. My problem is:"
and the task. Replies are read as AgentBench's ``extract_action`` reads them: the last ``Act:``
line that names an action decides; ``bash`` runs every ```bash block of the reply, joined by a
blank line; ``answer`` takes what lies between the first ``(`` and the last ``)`` of its line
(an answer line without both is skipped); ``finish`` ends the episode (the system was changed).
A reply with no action ends the episode. Outputs are shown as AgentBench shows them ("The
output of the OS:" and the output, cut by the environment at 780 characters with a note, or
"The output of the OS is empty."); at most 8 rounds, not announced.

Deliberately plain so that repair directions have something to fix: no validation of commands
or answers, the exit status and a stopped command's reason are not shown, a reply without an
action ends the episode, and the last rounds are not announced. Standard library and
harnessctl_runtime only.
"""

import json
import re

from harnessctl_runtime import Action, Failure, Harness, Observation, Recovery, State

ACT = re.compile(r"Act:\s*(.+)")  # AgentBench's patterns, as written there
BASH_BLOCK = re.compile(r"```bash\n(.*?)\n```", re.DOTALL)
ROLES = {"user": "user", "agent": "assistant"}  # AgentBench's roles in the example, as chat roles


class OSHarness(Harness):
    def example_messages(self) -> list[dict]:
        """The instructions with the example problem, then the example's turns."""
        shot = json.loads(self.read_prompt("one_shot.json"))
        first = self.read_prompt("instructions.md") + "Now, my problem is:\n\n" + shot[0]["content"]
        turns = [{"role": ROLES[m["role"]], "content": m["content"]} for m in shot[1:]]
        return [{"role": "user", "content": first}] + turns

    def build_context(self, state: State) -> list[dict]:
        task = {"role": "user", "content": self.task_message(state)}
        return self.example_messages() + [task] + self.history(state)

    def task_message(self, state: State) -> str:
        return "Now, I will start a new problem in a new OS. My problem is:\n\n" + (
            state.task.get("instruction", "")
        )

    def parse_action(self, reply: str, state: State) -> Action:
        for act in reversed(ACT.findall(reply)):  # the last action line decides
            name = act.lower()
            if name.startswith("bash"):
                script = "\n\n".join(BASH_BLOCK.findall(reply))
                return Action(kind="tool", tool="bash", argument=script)
            if name.startswith("finish"):
                return Action(kind="tool", tool="finish", argument="")
            if name.startswith("answer"):
                content = act[6:].strip()
                left, right = content.find("("), content.rfind(")")
                if left == -1 or right == -1:
                    continue
                return Action(kind="answer", argument=content[left + 1 : right])
        return Action(kind="invalid", error="no action (Act: bash, answer or finish) in the reply")

    def validate_action(self, action: Action, state: State) -> str | None:
        return None

    def show(self, observation: Observation) -> str:
        if not observation.text:
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
