"""``sim/toy``: a simulated player of the toy game. A TEST DOUBLE, not a model.

It knows the solution (the environment's oracle) and plays it one command per turn, failing
in two seeded ways that a harness change can repair:

- ``prefix`` (forgets the format): from a drawn turn on, it writes its next command as prose
  ("I will go to the fridge next.") with no ``Action:`` line, until a message from the harness
  after that turn restates the format (contains ``Action:``). A harness that ends the
  episode on a reply without an action loses it (``invalid_format``); one that re-prompts
  with the format gets the command on the next turn.
- ``wordy`` (wrong command form): it says one verb of the solution its own way ("pick up
  apple" for ``take apple``; also ``walk to``, ``pull open``, ``place``), and the game
  answers "Nothing happens.". It repeats that form until the harness's feedback lists the
  valid command forms (at least two of ``go to <``, ``take <``, ``open <``, ``put <``), then
  uses the right form. A harness that only passes "Nothing happens." on runs out of rounds
  (``tool_error``).

Randomness: one ``random.Random`` per (seed, task id, mode); its first draw decides whether
the mode is on (``draw < rate``), later draws fix its details, so the same seed and task fail
the same way under every harness (paired comparisons), and raising ``skill`` only switches
modes off. Rates are ``BASE_RATES`` scaled by ``2 * (1 - skill)``; ``rate_<mode>`` params
override them. The reply is a pure function of (oracle, messages, seed, params).

Offered an ``act`` function (function calling), it answers with calls instead of text; the
``prefix`` mode then does not apply.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harnessctl.policies import OracleSim, scaled_rates

MODES = ("prefix", "wordy")
BASE_RATES: dict[str, float] = {"prefix": 0.45, "wordy": 0.4}
DEFAULT_SKILL = 0.5
#: How the sim says a verb when ``wordy`` is on for it.
SYNONYMS = {"go to": "walk to", "take": "pick up", "open": "pull open", "put": "place"}

_ACTION = re.compile(r"^\s*Action:\s*(.+?)\s*$", re.M)
_FORM = re.compile(r"\b(go to|take|open|put) <", re.I)


@dataclass(frozen=True)
class Exchange:
    """One assistant turn: the command it issued (if any) and what came back after it."""

    command: str | None
    feedback: str


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(part) for part in content)
    if isinstance(content, dict):
        return _text(content.get("text", content.get("content", "")))
    return str(content)


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


def _call_command(call: Any) -> str | None:
    function = _field(call, "function") or {}
    raw = _field(function, "arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    command = arguments.get("command") if isinstance(arguments, dict) else None
    return command if isinstance(command, str) else None


def read_history(messages: Sequence[Any]) -> list[Exchange]:
    """The assistant turns of the conversation, each with the messages that followed it."""
    turns: list[Exchange] = []
    for message in messages or []:
        role = str(_field(message, "role") or "user")
        if role == "assistant":
            calls = _field(message, "tool_calls") or []
            content = _text(_field(message, "content"))
            match = _ACTION.search(content)
            command = _call_command(calls[0]) if calls else (match.group(1) if match else None)
            turns.append(Exchange(command, ""))
        elif turns and role in ("user", "tool"):
            last = turns[-1]
            text = _text(_field(message, "content"))
            turns[-1] = Exchange(last.command, f"{last.feedback}\n{text}".strip())
    return turns


def restates_format(text: str) -> bool:
    """The harness told the player the action format again."""
    return "Action:" in text


def lists_forms(text: str) -> bool:
    """The harness listed the game's command forms (at least two of them)."""
    return len({m.lower() for m in _FORM.findall(text)}) >= 2


def effective_rates(skill: float, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Base rates scaled by ``2 * (1 - skill)`` and clipped to [0, 1]; overrides win unscaled."""
    return scaled_rates(BASE_RATES, skill, overrides)


def _verb(command: str) -> str:
    return next((v for v in SYNONYMS if command.startswith(v + " ")), "")


@dataclass(frozen=True)
class Plan:
    """The episode-level draws for one (seed, task)."""

    prefix_turn: int | None  # the turn from which the player forgets the Action: line
    wordy_verb: str | None  # the verb the player says its own way


def plan_episode(task_id: str, solution: Sequence[str], seed: int, rates: Mapping[str, float]):
    prefix_turn: int | None = None
    wordy_verb: str | None = None
    rng = random.Random(f"{seed}|{task_id}|prefix")
    if rng.random() < rates.get("prefix", 0.0):
        prefix_turn = rng.randrange(len(solution))
    rng = random.Random(f"{seed}|{task_id}|wordy")
    if rng.random() < rates.get("wordy", 0.0):
        verbs = sorted({_verb(c) for c in solution} - {""})
        wordy_verb = rng.choice(verbs) if verbs else None
    return Plan(prefix_turn, wordy_verb)


def _say(command: str, verb: str | None) -> str:
    """``command`` as the player says it: with its own word for ``verb``."""
    if verb and _verb(command) == verb:
        rest = command[len(verb) + 1 :]
        if verb == "put":
            rest = rest.replace(" in ", " into ", 1)
        return f"{SYNONYMS[verb]} {rest}"
    return command


def next_reply(
    oracle: Mapping[str, Any],
    messages: Sequence[Any],
    seed: int,
    rates: Mapping[str, float],
    function_calling: bool = False,
) -> str | dict[str, Any]:
    """The player's next reply to ``messages``."""
    solution = [str(c) for c in oracle.get("solution") or []] or ["look"]
    plan = plan_episode(str(oracle.get("task_id", "")), solution, seed, rates)
    history = read_history(messages)
    turn = len(history)
    done = 0  # solution commands carried out so far (issued in the right form, not refused)
    for exchange in history:
        if (
            done < len(solution)
            and exchange.command is not None
            and exchange.command.strip().lower() == solution[done]
            and "Nothing happens" not in exchange.feedback
        ):
            done += 1
    command = solution[min(done, len(solution) - 1)]
    learned = any(lists_forms(e.feedback) for e in history)
    verb = None if learned else plan.wordy_verb
    said = _say(command, verb)
    if function_calling:
        return {"content": None, "tool_calls": [{"name": "act", "arguments": {"command": said}}]}
    start = plan.prefix_turn
    if (
        start is not None
        and turn >= start
        and not any(restates_format(e.feedback) for e in history[start:])
    ):
        return f"I will {said} next."
    return f"Thought: next, {said}.\nAction: {said}"


class SimToy(OracleSim):
    """``sim/toy`` as an offline policy plugin: the environment's oracle is its view."""

    description = (
        "TEST DOUBLE, not a model: oracle-backed simulated player of the toy game with seeded, "
        "harness-sensitive failure modes (params: skill, rate_prefix, rate_wordy)"
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
    ) -> str | dict[str, Any]:
        rates = self.rates(params)
        offered = {
            _field(_field(t, "function") or {}, "name") for t in tools or [] if t is not None
        }
        return next_reply(view, messages, seed, rates, "act" in offered)
