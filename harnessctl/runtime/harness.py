"""Lifecycle hooks and their defaults.

A harness subclasses :class:`Harness` and overrides only the hooks it changes:

- ``build_context(state)``      messages for the next model call
- ``parse_action(reply, state)``  model reply -> :class:`Action`
- ``validate_action(action, state)``  reject with feedback before execution (``None`` = ok)
- ``mediate_tool(action, state)``  run / guard a tool call, shape the :class:`Observation`
- ``recover(failure, state)``   on a format failure, a rejected action or a tool error
- ``should_stop(state)`` / ``finalize(state)``  termination and the final answer

The defaults implement a plain text protocol: a fenced block whose language names a tool
(```sql ... ```), or ``Final Answer: ...``. A harness may speak function calling instead (or
as well): it declares OpenAI function specs in ``tool_specs`` (a function is named after the
tool it runs, see :func:`function_tool`), they are sent with every call
(``model_params(state)``), and a reply's tool call becomes an :class:`Action` with
``call_id`` and parsed ``arguments``; a call of ``answer_tool`` is the final answer.
``history`` replays calls the OpenAI way: the assistant message with its ``tool_calls``, then a
``tool`` message per call. ``parse_action`` keeps its text signature: the whole reply (text
and tool calls) is ``state.reply``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import tools as _tools
from .client import ModelReply, ToolCall

FINAL_ANSWER = re.compile(r"Final Answer:\s*(.*)", re.S)
FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n?(.*?)```", re.S)
# What the model is told about the calls of a reply that were not run (one call per turn).
CALL_NOT_RUN = "Not run: one tool call per turn. Call it again on its own if still needed."


def function_tool(name: str, description: str = "", parameters: dict | None = None) -> dict:
    """An OpenAI function spec for ``tool_specs``; ``parameters`` is a JSON schema object."""
    schema = parameters if parameters is not None else {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


@dataclass
class Action:
    """What the model asked for. ``kind`` is ``tool``, ``answer`` or ``invalid``.

    From the text protocol: ``argument`` is the text (a fenced block, the answer). From a
    function call: ``call_id`` is the call's id (the tool message answers it), ``arguments``
    its parsed JSON object, and ``argument`` the single string argument when there is exactly
    one (else the arguments as JSON text), so hooks written for text work on calls too.
    """

    kind: str
    tool: str | None = None
    argument: str = ""
    error: str | None = None
    call_id: str | None = None
    arguments: dict | None = None

    @property
    def is_call(self) -> bool:
        """Whether the action came from a function call (rather than from reply text)."""
        return self.call_id is not None


@dataclass
class Observation:
    """What a tool call returned: the text the model will see, and whether it failed."""

    text: str
    ok: bool = True
    payload: Any = None
    #: The environment ended the episode with this step (host-served environments): the loop
    #: stops with status ``done`` and the host scores the episode's final state; with
    #: ``payload["truncated"]`` the episode was cut at its step limit: status ``step_limit``.
    done: bool = False


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
    """One model call and what the harness sent back after it; ``tool_calls`` are all the
    function calls of the reply (the action is built from the first)."""

    round: int
    reply: str
    kind: str  # tool | answer | invalid_format | invalid_action | tool_error
    action: Action | None = None
    observation: Observation | None = None
    feedback: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class State:
    """Everything a hook may read; ``scratch`` is the harness's own; ``reply`` is the latest
    model reply in full (text and tool calls), set before ``parse_action`` is called."""

    task: dict
    max_rounds: int
    round: int = 0
    turns: list[Turn] = field(default_factory=list)
    answer: str | None = None
    status: str | None = None
    tool_error_streak: int = 0
    scratch: dict = field(default_factory=dict)
    reply: ModelReply | None = None

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
    #: OpenAI function specs sent with every call (see :func:`function_tool`); empty: none.
    tool_specs: list[dict] = []
    #: ``auto``, ``none``, ``required`` or ``{"type": "function", "function": {"name": ...}}``
    #: sent with the specs (``settings.tool_choice`` overrides); None: the provider's default.
    tool_choice: str | dict | None = None
    #: The function whose call is the final answer (its single string argument, or its
    #: arguments as JSON), or None: answers come as text.
    answer_tool: str | None = None

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
        parts = [task.get("instruction", ""), task.get("context", ""), task.get("observation", "")]
        return "\n".join(p for p in parts if p)

    def history(self, state: State) -> list[dict]:
        messages: list[dict] = []
        for turn in state.turns:
            messages += self.turn_messages(turn)
        return messages

    def turn_messages(self, turn: Turn) -> list[dict]:
        """One turn as messages: the reply, then the feedback as a user message; a reply with
        tool calls is followed by one tool message per call (the feedback answers the call the
        action came from, the others were not run)."""
        messages: list[dict[str, Any]]
        if not turn.tool_calls:
            messages = [{"role": "assistant", "content": turn.reply}]
            if turn.feedback is not None:
                messages.append({"role": "user", "content": turn.feedback})
            return messages
        calls = [c.to_dict() for c in turn.tool_calls]
        messages = [{"role": "assistant", "content": turn.reply or None, "tool_calls": calls}]
        answered = turn.action.call_id if turn.action is not None else None
        for call in turn.tool_calls:
            text = (turn.feedback or "") if call.id == answered else CALL_NOT_RUN
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        if turn.feedback is not None and answered not in {c.id for c in turn.tool_calls}:
            messages.append({"role": "user", "content": turn.feedback})
        return messages

    def function_names(self) -> list[str]:
        """The names of the functions in ``tool_specs``."""
        return [str((spec.get("function") or {}).get("name")) for spec in self.tool_specs]

    def parse_tool_call(self, call: ToolCall, state: State) -> Action:
        """A function call as an :class:`Action`: ``answer`` for ``answer_tool``, ``tool`` for
        a tool or a declared function, ``invalid`` for anything else or arguments that are not
        a JSON object."""
        tool, call_id = call.name, call.id
        error: str | None
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError as exc:
            error = f"the arguments of {call.name} are not valid JSON ({exc}): {call.arguments}"
            return Action(
                kind="invalid", argument=call.arguments, error=error[:500], tool=tool,
                call_id=call_id,
            )  # fmt: skip
        if not isinstance(arguments, dict):
            error = f"the arguments of {call.name} must be a JSON object: {call.arguments}"
            return Action(
                kind="invalid", argument=call.arguments, error=error[:500], tool=tool,
                call_id=call_id,
            )  # fmt: skip
        text = _single_string(arguments)
        argument = text if text is not None else json.dumps(arguments)
        kind, error = "tool", None
        if call.name == self.answer_tool:
            kind = "answer"
        elif call.name not in self.tools and call.name not in self.function_names():
            kind, error = "invalid", f"unknown tool {call.name!r}"
        return Action(
            kind=kind, argument=argument, error=error, arguments=arguments, tool=tool,
            call_id=call_id,
        )  # fmt: skip

    def model_params(self, state: State) -> dict:
        """What the next model call sends besides the messages: ``sampling``, and
        ``tool_specs`` with ``tool_choice`` when the harness declares functions."""
        params = dict(self.sampling)
        if self.tool_specs:
            params["tools"] = list(self.tool_specs)
            choice = self.settings.get("tool_choice", self.tool_choice)
            if choice is not None:
                params["tool_choice"] = choice
        return params

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
        calls = state.reply.tool_calls if state.reply is not None else []
        if calls:  # one call per turn: the first; the others are answered as not run
            return self.parse_tool_call(calls[0], state)
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
        tool = self.tools.get(action.tool or "")
        if tool is None:
            return Observation(text=f"unknown tool {action.tool!r}", ok=False)
        if action.arguments is not None:  # a function call
            run_call = getattr(tool, "run_call", None)
            if run_call is not None:
                return run_call(action.arguments, limit=self.observation_limit)
            if _single_string(action.arguments) is None:
                got = json.dumps(action.arguments)[:200]
                text = f"tool {action.tool!r} takes one string argument, got {got}"
                return Observation(text=text, ok=False)
        return tool.run(action.argument, limit=self.observation_limit)

    def recover(self, failure: Failure, state: State) -> Recovery:
        if failure.kind == "invalid_format":
            return Recovery("abort")
        return Recovery("continue")

    def should_stop(self, state: State) -> bool:
        return state.status is not None or state.round >= self.max_rounds

    def finalize(self, state: State) -> str | None:
        return state.answer


def _single_string(arguments: dict) -> str | None:
    """The value of a call's only argument when it is a string (``{"query": "..."}``)."""
    if len(arguments) == 1:
        (value,) = arguments.values()
        if isinstance(value, str):
            return value
    return None
