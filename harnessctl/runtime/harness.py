"""Lifecycle hooks and their defaults.

A harness subclasses :class:`Harness` and overrides only the hooks it changes:

- ``build_context(state)``      messages for the next model call
- ``parse_action(reply, state)``  model reply -> :class:`Action`
- ``validate_action(action, state)``  reject with feedback before execution (``None`` = ok)
- ``mediate_tool(action, state)``  run / guard a tool call, shape the :class:`Observation`
- ``recover(failure, state)``   on a format failure, a rejected action or a tool error
- ``should_stop(state)`` / ``finalize(state)``  termination and the final answer

The defaults implement a plain text protocol: a fenced block whose language names a tool
(```sql ... ```), or ``Final Answer: ...``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import tools as _tools

FINAL_ANSWER = re.compile(r"Final Answer:\s*(.*)", re.S)
FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n?(.*?)```", re.S)


@dataclass
class Action:
    """What the model asked for. ``kind`` is ``tool``, ``answer`` or ``invalid``."""

    kind: str
    tool: str | None = None
    argument: str = ""
    error: str | None = None


@dataclass
class Observation:
    """What a tool call returned: the text the model will see, and whether it failed."""

    text: str
    ok: bool = True
    payload: Any = None


@dataclass
class Failure:
    """Handed to ``recover``; ``kind``: ``invalid_format``, ``invalid_action``, ``tool_error``."""

    kind: str
    message: str
    action: Action | None = None


@dataclass
class Recovery:
    """``recover``'s decision: ``continue`` (feed ``message`` or the error back and go on),
    ``reprompt`` (same, with ``message`` as the feedback) or ``abort`` (end the episode)."""

    kind: str = "continue"
    message: str | None = None


@dataclass
class Turn:
    """One model call and what the harness sent back after it."""

    round: int
    reply: str
    kind: str  # tool | answer | invalid_format | invalid_action | tool_error
    action: Action | None = None
    observation: Observation | None = None
    feedback: str | None = None


@dataclass
class State:
    """Everything a hook may read; ``scratch`` is the harness's own."""

    task: dict
    max_rounds: int
    round: int = 0
    turns: list[Turn] = field(default_factory=list)
    answer: str | None = None
    status: str | None = None
    tool_error_streak: int = 0
    scratch: dict = field(default_factory=dict)

    @property
    def rounds_left(self) -> int:
        return self.max_rounds - self.round


class Harness:
    """Base harness. Settings come from ``harness.yaml`` (``settings:``)."""

    #: Default rounds (model calls) per episode; ``settings.max_rounds`` overrides.
    max_rounds: int = 15
    #: Observations longer than this are cut (``settings.observation_limit``).
    observation_limit: int = 800
    #: Sampling parameters sent with every call (the policy's own parameters win).
    sampling: dict = {}

    def __init__(self, harness_dir: Path, task_dir: Path, settings: dict | None = None) -> None:
        self.harness_dir = Path(harness_dir)
        self.task_dir = Path(task_dir)
        self.settings = dict(settings or {})
        self.max_rounds = int(self.settings.get("max_rounds", self.max_rounds))
        self.observation_limit = int(self.settings.get("observation_limit", self.observation_limit))
        self.tools = _tools.open_tools(self.task_dir)

    # --- helpers for subclasses -------------------------------------------------------
    def read_prompt(self, name: str) -> str:
        """Text of ``prompts/<name>`` in the harness directory."""
        return (self.harness_dir / "prompts" / name).read_text(encoding="utf-8")

    def task_message(self, state: State) -> str:
        task = state.task
        parts = [task.get("instruction", ""), task.get("context", "")]
        return "\n".join(p for p in parts if p)

    def history(self, state: State) -> list[dict]:
        messages: list[dict] = []
        for turn in state.turns:
            messages.append({"role": "assistant", "content": turn.reply})
            if turn.feedback is not None:
                messages.append({"role": "user", "content": turn.feedback})
        return messages

    # --- hooks --------------------------------------------------------------------------
    def system_prompt(self, state: State) -> str:
        return ""

    def build_context(self, state: State) -> list[dict]:
        messages = []
        system = self.system_prompt(state)
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": self.task_message(state)})
        return messages + self.history(state)

    def parse_action(self, reply: str, state: State) -> Action:
        answer = FINAL_ANSWER.search(reply)
        fence = FENCE.search(reply)
        if fence and (not answer or fence.start() < answer.start()):
            lang = fence.group(1).lower()
            if lang in self.tools:
                return Action(kind="tool", tool=lang, argument=fence.group(2).strip())
            return Action(kind="invalid", error=f"unknown tool {lang!r}")
        if answer:
            return Action(kind="answer", argument=answer.group(1).strip())
        return Action(kind="invalid", error="no action found in the reply")

    def validate_action(self, action: Action, state: State) -> str | None:
        return None

    def mediate_tool(self, action: Action, state: State) -> Observation:
        tool = self.tools[action.tool or ""]
        return tool.run(action.argument, limit=self.observation_limit)

    def recover(self, failure: Failure, state: State) -> Recovery:
        if failure.kind == "invalid_format":
            return Recovery("abort")
        return Recovery("continue")

    def should_stop(self, state: State) -> bool:
        return state.status is not None or state.round >= self.max_rounds

    def finalize(self, state: State) -> str | None:
        return state.answer
