"""``sim/alfworld``: a simulated ALFWorld player. A TEST DOUBLE, not a model.

It knows the game's walkthrough (the environment's oracle) and plays it one command per turn
as ``Think: ...`` / ``Action: <command>``, failing in seeded ways that depend on what the
harness shows it (docs/sim-policy.md lists every rule). Each (seed, game) draws at most one
failure mode:

- ``format``: from a drawn turn on, it writes its next step as prose ("I should go to the
  desk 1 next.") with no ``Action:`` line, until a message from the harness after that turn
  restates the format (contains ``Action:``). ``alfworld-base`` ends the episode
  (``invalid_format``); a harness that re-prompts gets the command on the next turn.
- ``phrasing``: it says one verb of the walkthrough its own way ("pick up X from Y" for
  ``take X from Y``; also ``walk to``, ``place X on Y``, ``turn on``, ``warm``, ``chill``,
  ``wash``, ``pull open``), and the game answers "Nothing happens.". It keeps its own
  wording for a command until a message from the harness spells out that exact command in
  the game's form (a list of the admissible commands does), then uses it. ``alfworld-base``
  passes "Nothing happens." on until the steps run out (``tool_error``).
- ``loop``: from a drawn turn on, it keeps sending ``look`` (admissible, so nothing is
  refused), until a message from the harness after that turn says the action was repeated
  (contains "repeat"). ``alfworld-base`` never notices (``step_limit``).
- ``drift``: once its context holds ``DRIFT_TURNS`` replies of its own, it loses the goal
  and wanders to a receptacle that is not on its way, unless the last message of the context
  states the goal (contains "Your task is to"). ``alfworld-base`` states the goal once, at the
  top (``step_limit``); a harness that restates it at the end of the context keeps it on track.

A command counts as carried out when the harness's answer to it neither is the game's
"Nothing happens." nor says the command was not run (``NOT_RUN_WORDS``). After a detour (a
``go to`` off the walkthrough), it first goes back to where the walkthrough has it.

Randomness: each mode draws once per (seed, game id) and is on below its rate; of the modes
that are on, the one whose draw is smallest against its rate is the episode's (so raising
``skill`` only switches modes off); another draw fixes the turn and the verb. The same seed
and game fail the same way under every harness (paired comparisons). Rates are
``BASE_RATES`` scaled by ``2 * (1 - skill)``; ``rate_<mode>`` params override them. The reply
is a pure function of (oracle, messages, seed, params). Offered an ``act`` function, it
answers with calls instead of text; ``format`` then does not apply.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harnessctl.policies import OracleSim, scaled_rates
from harnessctl.policies.sim_signals import field_of, offered_functions, text_of

MODES = ("format", "phrasing", "loop", "drift")
BASE_RATES: dict[str, float] = {"format": 0.25, "phrasing": 0.25, "loop": 0.25, "drift": 0.25}
DEFAULT_SKILL = 0.5
#: Replies of its own in the context from which ``drift`` makes it lose the goal.
DRIFT_TURNS = 3
#: How the sim says a verb of the walkthrough when ``phrasing`` is on for it.
SYNONYMS = {
    "go to": "walk to",
    "take": "pick up",
    "move": "place",
    "use": "turn on",
    "heat": "warm",
    "cool": "chill",
    "clean": "wash",
    "open": "pull open",
}
#: Words in the harness's answer that mean the command was not carried out.
NOT_RUN_WORDS = ("nothing happens", "not run", "not sent", "not admissible", "rejected")
GOAL_MARK = "Your task is to"
LOOK = "look"

_ACTION = re.compile(r"^\s*Action:\s*(.+?)\s*$", re.M)
_PLACE = re.compile(r"\ba ([a-z]+ \d+)")


@dataclass(frozen=True)
class Exchange:
    """One reply: the command it issued (if any) and the harness's answer after it."""

    command: str | None
    feedback: str


def _call_command(call: Any) -> str | None:
    function = field_of(call, "function") or {}
    raw = field_of(function, "arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    command = arguments.get("command") if isinstance(arguments, dict) else None
    return command if isinstance(command, str) else None


def read_history(messages: Sequence[Any]) -> list[Exchange]:
    """The replies of the conversation, each with the messages that followed it."""
    turns: list[Exchange] = []
    for message in messages or []:
        role = str(field_of(message, "role") or "user")
        if role == "assistant":
            calls = field_of(message, "tool_calls") or []
            match = _ACTION.search(text_of(field_of(message, "content")))
            command = _call_command(calls[0]) if calls else (match.group(1) if match else None)
            turns.append(Exchange(command, ""))
        elif turns and role in ("user", "tool"):
            last = turns[-1]
            text = text_of(field_of(message, "content"))
            turns[-1] = Exchange(last.command, f"{last.feedback}\n{text}".strip())
    return turns


def carried_out(exchange: Exchange) -> bool:
    """The command was run and the game accepted it (see ``NOT_RUN_WORDS``)."""
    feedback = exchange.feedback.lower()
    return exchange.command is not None and not any(w in feedback for w in NOT_RUN_WORDS)


def effective_rates(skill: float, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Base rates scaled by ``2 * (1 - skill)`` and clipped to [0, 1]; overrides win unscaled."""
    return scaled_rates(BASE_RATES, skill, overrides)


def _verb(command: str) -> str:
    return next((v for v in SYNONYMS if command.startswith(v + " ")), "")


@dataclass(frozen=True)
class Plan:
    """The episode-level draws for one (seed, game)."""

    mode: str | None  # the failure mode of this episode, or None
    turn: int  # format, loop: the turn from which it applies
    verb: str  # phrasing: the verb said its own way


def plan_episode(
    game_id: str, walkthrough: Sequence[str], seed: int, rates: Mapping[str, float]
) -> Plan:
    """Each mode draws once (``random.Random(f"{seed}|{game_id}|{mode}")``) and is on when its
    draw is below its rate; of the modes that are on, the one with the smallest draw / rate
    is the episode's. Scaling every rate by the same factor (``skill``) keeps that order, so
    raising ``skill`` only ever switches an episode's mode off, never to another one."""
    best: tuple[float, str] | None = None
    for name in MODES:
        rate = max(0.0, rates.get(name, 0.0))
        draw = random.Random(f"{seed}|{game_id}|{name}").random()
        if draw < rate and (best is None or draw / rate < best[0]):
            best = (draw / rate, name)
    rng = random.Random(f"{seed}|{game_id}|details")
    turn = rng.randrange(max(1, len(walkthrough)))
    verbs = sorted({_verb(c) for c in walkthrough} - {""})
    verb = rng.choice(verbs) if verbs else ""
    return Plan(best[1] if best else None, turn, verb)


def _say(command: str, verb: str) -> str:
    """``command`` as the player says it, with its own word for ``verb``."""
    if verb and _verb(command) == verb:
        rest = command[len(verb) + 1 :]
        if verb == "move":
            rest = rest.replace(" to ", " on ", 1)
        if verb == "take":
            rest = rest.replace(" from ", " off ", 1)
        return f"{SYNONYMS[verb]} {rest}"
    return command


def _place(command: str | None) -> str | None:
    return command[len("go to ") :] if command and command.startswith("go to ") else None


def _progress(walkthrough: Sequence[str], history: Sequence[Exchange]) -> tuple[int, str | None]:
    """(walkthrough commands carried out in order, where the player is: the target of its
    last carried-out ``go to``)."""
    done, here = 0, None
    for exchange in history:
        if not carried_out(exchange):
            continue
        command = (exchange.command or "").strip()
        here = _place(command) or here
        if done < len(walkthrough) and command == walkthrough[done]:
            done += 1
    return done, here


def _detour(oracle: Mapping[str, Any], messages: Sequence[Any], seed: int, turn: int) -> str:
    """A receptacle off the walkthrough's way, from the first observation's list."""
    users = (m for m in messages if field_of(m, "role") == "user")
    first = next((text_of(field_of(m, "content")) for m in users), "")
    on_way = {_place(c) for c in oracle.get("walkthrough") or []}
    places = [p for p in dict.fromkeys(_PLACE.findall(first)) if p not in on_way]
    if not places:
        return LOOK
    rng = random.Random(f"{seed}|{oracle.get('task_id')}|{turn}")
    return f"go to {rng.choice(places)}"


def next_command(
    oracle: Mapping[str, Any],
    messages: Sequence[Any],
    seed: int,
    rates: Mapping[str, float],
    function_calling: bool = False,
) -> tuple[str, bool]:
    """(the command the player issues next, whether it writes it as prose)."""
    walkthrough = [str(c) for c in oracle.get("walkthrough") or []] or [LOOK]
    plan = plan_episode(str(oracle.get("task_id", "")), walkthrough, seed, rates)
    history = read_history(messages)
    turn = len(history)
    done, here = _progress(walkthrough, history)
    # back on the way after a detour: the place of the walkthrough's last carried-out go to
    way = next((_place(c) for c in reversed(walkthrough[:done]) if _place(c)), None)
    command = walkthrough[min(done, len(walkthrough) - 1)]
    if way is not None and here != way:
        command = f"go to {way}"
    after = history[plan.turn :] if plan.turn <= turn else []
    if (
        plan.mode == "loop"
        and turn >= plan.turn
        and not any("repeat" in e.feedback.lower() for e in after)
    ):
        return LOOK, False
    if plan.mode == "drift" and turn >= DRIFT_TURNS:
        last = text_of(field_of(messages[-1], "content")) if messages else ""
        if GOAL_MARK not in last:
            return _detour(oracle, messages, seed, turn), False
    if plan.mode == "phrasing" and not any(command in e.feedback for e in history):
        command = _say(command, plan.verb)
    prose = (
        plan.mode == "format"
        and not function_calling
        and turn >= plan.turn
        and not any("Action:" in e.feedback for e in after)
    )
    return command, prose


def next_reply(
    oracle: Mapping[str, Any],
    messages: Sequence[Any],
    seed: int,
    rates: Mapping[str, float],
    function_calling: bool = False,
) -> str | dict[str, Any]:
    """The player's next reply to ``messages``."""
    command, prose = next_command(oracle, messages, seed, rates, function_calling)
    if function_calling:
        return {"content": None, "tool_calls": [{"name": "act", "arguments": {"command": command}}]}
    if prose:
        return f"I should {command} next."
    return f"Think: to get on with the task, I will {command}.\nAction: {command}"


class SimAlfworld(OracleSim):
    """``sim/alfworld`` as an offline policy plugin: the environment's oracle is its view."""

    description = (
        "TEST DOUBLE, not a model: walkthrough-backed simulated ALFWorld player with seeded, "
        "harness-sensitive failure modes (params: skill, rate_format, rate_phrasing, "
        "rate_loop, rate_drift)"
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
        offered = offered_functions(tools)
        return next_reply(view, messages, seed, rates, "act" in offered)
