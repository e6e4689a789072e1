"""``sim/miniwob``: a simulated web agent. A TEST DOUBLE, not a model.

It solves each task with the scripted gold (:mod:`.gold`, reading the page the harness
shows it) one action per turn as ``Think: ...`` / ``Action: <action>``, failing in seeded
ways that depend on what the harness does. Each (seed, task) draws at most one mode:

- ``format``: from a drawn turn on, it writes its next action as prose ("I should click [6]
  next.") with no ``Action:`` line, until a message from the harness after that turn
  restates the format (contains ``Action:``). ``miniwob-base`` ends the episode
  (``invalid_format``); a harness that re-prompts gets the action on the next turn. Offered
  the functions, it writes its call as JSON text in the reply instead of a tool call
  (``{"name": "click", "arguments": {"ref": 6}}``, as a small model whose server's tool-call
  parser missed it), every time: ``miniwob-base`` ends the episode (``invalid_format``); a
  harness that reads a call written as text (``call-in-text``) gets it done.
- ``label``: from a drawn turn on, it names the element it clicks by its text
  (``click "Submit"``) instead of its ref, every time; the environment refuses it (a ref is
  a number) and ``miniwob-base`` passes the refusal on until the episode ends
  (``tool_error``). A harness that resolves a label to the ref of the element showing that
  text on the latest page gets the click done.
- ``loop``: from a drawn turn on, it sends its last click or typing again and again
  (clicking a checkbox twice unticks it, typing twice doubles the text), until a message
  from the harness after that turn says the action was repeated (contains "repeat").
  ``miniwob-base`` runs every repeat (``step_limit``).
- ``drift``: once its context holds more than ``DRIFT_PAGES`` pages (messages with a
  ``Page:``), it loses its place and does its first action of the episode again.
  ``miniwob-base`` keeps every page of the history in full (``step_limit`` or
  ``wrong_answer``); a harness that keeps only the latest page in full keeps it on track.
  Only tasks of more than three actions can drift.

An action counts as carried out when the answer to it is not an error (:mod:`.play`).
Randomness as ``sim/alfworld``'s: each mode draws once per (seed, task id) and is on below its
rate; of the modes that are on, the one whose draw is smallest against its rate is the
episode's (raising ``skill`` only switches modes off); another draw fixes the turn. Rates are
``BASE_RATES`` scaled by ``2 * (1 - skill)``; ``rate_<mode>`` params override them. The reply
is a pure function of (oracle, messages, seed, params). Offered the environment's functions,
it answers with calls (``format`` writes them as text, above; ``label`` does not apply).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harnessctl.policies import OracleSim
from harnessctl.policies.sim_signals import field_of, offered_functions, text_of

from .gold import solve
from .play import as_call, latest_observation, read_history, taken, text_reply
from .replay import GIVE_UP

MODES = ("format", "label", "loop", "drift")
BASE_RATES: dict[str, float] = {"format": 0.35, "label": 0.35, "loop": 0.35, "drift": 0.35}
DEFAULT_SKILL = 0.5
#: Pages in its context beyond which ``drift`` makes it lose its place.
DRIFT_PAGES = 3
REPEATED = "repeat"


@dataclass(frozen=True)
class Plan:
    """The episode-level draws for one (seed, task)."""

    mode: str | None
    turn: int  # format, label, loop: the turn from which it applies


def plan_episode(task_id: str, seed: int, rates: Mapping[str, float]) -> Plan:
    """Each mode draws once (``random.Random(f"{seed}|{task_id}|{mode}")``) and is on when its
    draw is below its rate; the on mode with the smallest draw / rate is the episode's."""
    best: tuple[float, str] | None = None
    for name in MODES:
        rate = max(0.0, rates.get(name, 0.0))
        draw = random.Random(f"{seed}|{task_id}|{name}").random()
        if draw < rate and (best is None or draw / rate < best[0]):
            best = (draw / rate, name)
    turn = random.Random(f"{seed}|{task_id}|details").randrange(2)
    return Plan(best[1] if best else None, turn)


#: An element's line with its own text: ``[ref]``, words without quotes, then ``"text"``.
LABELLED = re.compile(r'^\s*\[(\d+)\] (?:[^"\s]+ )*("(?:[^"\\]|\\.)*")', re.M)


def _label(action: str, observation: str) -> str | None:
    """``click "<text>"`` for a click of an element whose line shows a text, else None."""
    if not action.startswith("click ["):
        return None
    ref = action[len("click [") : -1]
    for match in LABELLED.finditer(observation):
        if match.group(1) == ref:
            return f"click {match.group(2)}"
    return None


def _pages(messages: Sequence[Any]) -> int:
    return sum(
        1
        for m in messages or []
        if field_of(m, "role") in ("user", "tool") and "Page:" in text_of(field_of(m, "content"))
    )


def next_action(
    oracle: Mapping[str, Any],
    messages: Sequence[Any],
    seed: int,
    rates: Mapping[str, float],
    function_calling: bool = False,
) -> tuple[str | None, str | None, bool]:
    """(the action it means, the action it sends, whether it writes it as prose)."""
    plan = plan_episode(str(oracle.get("task_id", "")), seed, rates)
    history = read_history(messages)
    turn, done = len(history), taken(history)
    observation = latest_observation(messages)
    meant = solve(str(oracle.get("task", "")), observation, done)
    after = history[plan.turn :] if plan.turn <= turn else []
    told = " ".join(e.feedback for e in after)
    if plan.mode == "loop" and turn >= max(plan.turn, 1) and REPEATED not in told.lower():
        last = history[-1].meant or history[-1].sent or ""
        if last.startswith(("click ", "type ")):
            meant = last
    if plan.mode == "drift" and done and _pages(messages) > DRIFT_PAGES:
        meant = done[0]
    if meant is None:
        return None, None, False
    sent = meant
    if plan.mode == "label" and not function_calling and turn >= plan.turn:
        sent = _label(meant, observation) or meant
    # under function calling the call is written as text every time; in text, prose until told
    prose = (
        plan.mode == "format" and turn >= plan.turn and (function_calling or "Action:" not in told)
    )
    return meant, sent, prose


def next_reply(
    oracle: Mapping[str, Any],
    messages: Sequence[Any],
    seed: int,
    rates: Mapping[str, float],
    function_calling: bool = False,
) -> str | dict[str, Any]:
    """The agent's next reply to ``messages``."""
    meant, sent, prose = next_action(oracle, messages, seed, rates, function_calling)
    if meant is None or sent is None:
        return GIVE_UP
    if function_calling:
        call = as_call(sent)
        if call is not None and prose:
            return f"{text_reply(meant).splitlines()[0]}\n{json.dumps(call)}"
        if call is not None:
            return {"content": text_reply(meant).split("\n")[0], "tool_calls": [call]}
    if prose:
        return f"Think: the next step of the task is: {meant}\nI should {sent} next."
    return text_reply(meant, sent)


class SimMiniwob(OracleSim):
    """``sim/miniwob`` as an offline policy plugin: the environment's oracle is its view."""

    description = (
        "TEST DOUBLE, not a model: scripted MiniWoB++ web agent with seeded, harness-sensitive "
        "failure modes (params: skill, rate_format, rate_label, rate_loop, rate_drift)"
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
        return next_reply(view, messages, seed, rates, "click" in offered)
