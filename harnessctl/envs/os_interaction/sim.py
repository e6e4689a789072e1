"""``sim/os_interaction``: a simulated shell agent. A TEST DOUBLE, not a model.

It knows the task's example script and expected answer (the environment's oracle) and speaks
AgentBench's text protocol (``Think:`` then ``Act: bash`` with a ```bash block,
``Act: answer(...)`` or ``Act: finish``). Played right: it runs the example script (a
``match`` task, which has none, runs ``ps -eo pid,args``), then answers with the command's
output as the harness showed it (the expected string for a ``match`` task), or finishes when
the task asked to change the system. The output is read from the harness's message after the
command: less a first line "The output of the OS...", less lines a harness added that begin
with ``Note:``, stripped.

It fails in seeded ways that depend on what the harness shows it. Each (seed, task) draws at
most one failure mode:

- ``error``: its first command has a wrong path in front (``cd /srv/task && ...``: "No such
  file or directory", exit status 1), and it takes whatever came back as the result, unless
  the harness's message after it states the exit status (contains "exit status"): then it
  runs the right command. ``os-base`` shows only the output (``wrong_answer``).
- ``format``: when it has the result, it writes it as prose ("The answer is 8.", "I have
  finished.") with no ``Act:`` line, until a message from the harness restates the format
  (contains ``Act: answer(``). ``os-base`` ends the episode (``invalid_format``).
- ``verbose``: on a task it answers, it answers in a sentence (``Act: answer(The answer is
  8.)``), unless a message from the harness after an earlier answer asked for the value only
  (contains "only the value"): ``os-base`` accepts the sentence and the check fails
  (``wrong_answer``); a harness that checks the answer's form makes it answer again.
- ``overrun``: once it has the result, it keeps re-checking it (runs the command again)
  instead of answering, until a message from the harness says how many rounds are left
  (contains "rounds left"). ``os-base`` never does (``step_limit`` after 8 commands).

Randomness as ``sim/alfworld``'s: each mode draws once per (seed, task id) and is on below
its rate; of the modes that are on, the smallest draw / rate wins. Rates are ``BASE_RATES``
scaled by ``2 * (1 - skill)``; ``rate_<mode>`` params override them. The reply is a pure
function of (oracle, messages, seed, params).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harnessctl.policies import OracleSim, scaled_rates
from harnessctl.policies.sim_signals import field_of, task_start, text_of

MODES = ("error", "format", "verbose", "overrun")
BASE_RATES: dict[str, float] = {"error": 0.15, "format": 0.15, "verbose": 0.15, "overrun": 0.15}
DEFAULT_SKILL = 0.5
PROBE = "ps -eo pid,args"
WRONG_DIR = "/srv/task"
_HEADER = re.compile(r"^\s*The output of the OS[^\n]*\n?", re.I)


@dataclass(frozen=True)
class Exchange:
    """One reply of the sim and the harness's messages after it."""

    reply: str
    feedback: str


def episode_messages(messages: Sequence[Any], description: str) -> list[Any]:
    """The messages from the one that states the task on (``sim_signals.task_start``): the
    harness's own turns before it (AgentBench's one-shot example) are not the sim's replies."""
    listed = list(messages or [])
    return listed[task_start(listed, description) :]


def read_history(messages: Sequence[Any], description: str = "") -> list[Exchange]:
    turns: list[Exchange] = []
    for message in episode_messages(messages, description):
        role = str(field_of(message, "role") or "user")
        text = text_of(field_of(message, "content"))
        if role == "assistant":
            turns.append(Exchange(text, ""))
        elif turns and role in ("user", "tool"):
            last = turns[-1]
            turns[-1] = Exchange(last.reply, f"{last.feedback}\n{text}".strip())
    return turns


def shown_output(feedback: str) -> str:
    """The command's output in the harness's message (see the module docstring)."""
    text = _HEADER.sub("", feedback, count=1)
    lines = [line for line in text.splitlines() if not line.startswith("Note:")]
    return "\n".join(lines).strip()


def effective_rates(skill: float, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Base rates scaled by ``2 * (1 - skill)`` and clipped to [0, 1]; overrides win unscaled."""
    return scaled_rates(BASE_RATES, skill, overrides)


def plan_mode(task_id: str, seed: int, rates: Mapping[str, float]) -> str | None:
    best: tuple[float, str] | None = None
    for name in MODES:
        rate = max(0.0, rates.get(name, 0.0))
        draw = random.Random(f"{seed}|{task_id}|{name}").random()
        if draw < rate and (best is None or draw / rate < best[0]):
            best = (draw / rate, name)
    return best[1] if best else None


def _bash(command: str, thought: str) -> str:
    return f"Think: {thought}\n\nAct: bash\n\n```bash\n{command}\n```"


def next_reply(
    oracle: Mapping[str, Any], messages: Sequence[Any], seed: int, rates: Mapping[str, float]
) -> str:
    """The sim's next reply to ``messages``."""
    command = oracle.get("example") if oracle.get("example_language") == "bash" else None
    command = command or PROBE
    mode = plan_mode(str(oracle.get("task_id", "")), seed, rates)
    if mode == "verbose" and not oracle.get("answers"):
        mode = None
    history = read_history(messages, str(oracle.get("description") or ""))
    said = "\n".join(e.feedback for e in history)
    ran = [e for e in history if "Act: bash" in e.reply]
    if not ran:
        if mode == "error":
            return _bash(f"cd {WRONG_DIR} && {command}", "I will run the commands in the task.")
        return _bash(command, "I will look at the system.")
    last_run = ran[-1]
    fixed = "exit status" in last_run.feedback.lower()
    if mode == "error" and len(ran) == 1 and WRONG_DIR in last_run.reply and fixed:
        return _bash(command, "The directory does not exist; I run the commands from /.")
    if mode == "overrun" and "rounds left" not in said.lower():
        return _bash(command, "Let me check that once more.")
    output = shown_output(last_run.feedback)
    if mode == "format" and "Act: answer(" not in said:
        return f"The answer is {output}." if oracle.get("answers") else "I have finished."
    if not oracle.get("answers"):
        return "Think: the system is set up as asked.\n\nAct: finish"
    answer = oracle["match"] if oracle.get("match") is not None else output
    if mode == "error" and WRONG_DIR in last_run.reply:
        answer = output  # it takes the error message for the result
    if mode == "verbose" and "only the value" not in said.lower():
        return f"Think: I have it.\n\nAct: answer(The answer is {answer}.)"
    return f"Think: I have the answer.\n\nAct: answer({answer})"


class SimOS(OracleSim):
    """``sim/os_interaction`` as an offline policy plugin: the environment's oracle is its
    view."""

    description = (
        "TEST DOUBLE, not a model: example-script-backed simulated shell agent with seeded, "
        "harness-sensitive failure modes (params: skill, rate_error, rate_format, "
        "rate_verbose, rate_overrun)"
    )

    base_rates = BASE_RATES
    default_skill = DEFAULT_SKILL

    def reply(
        self,
        view: Mapping[str, Any],
        messages: Sequence[Any],
        seed: int,
        params: Mapping[str, Any],
        tools: Sequence[Any],
    ) -> str:
        rates = self.rates(params)
        return next_reply(view, messages, seed, rates)
