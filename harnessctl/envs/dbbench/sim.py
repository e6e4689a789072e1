"""The simulated DBBench agent behind ``sim/dbbench``: a TEST DOUBLE, not a model.

It knows the answer (the task's oracle) and fails in seeded, reproducible ways that depend on
what the harness shows it, so that different harness changes rescue different failures. See
docs/sim-policy.md for every rule, rate and detection.

Randomness: one ``random.Random`` per (seed, task_id, mode); the first draw decides whether the
mode is on (``draw < rate``), later draws fix its details. The same seed and task give the same
draws under any harness (paired comparisons), and raising ``skill`` only ever switches modes off.
Decisions are episode-level; per-turn choices are keyed by the turn number (the count of
assistant messages in the request). The reply is a pure function of (oracle, messages, seed,
rates): no state is kept between calls.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harnessctl.policies import OracleSim, scaled_rates
from harnessctl.policies import sim_signals as generic

from . import sim_signals as sig
from .sim_sql import (
    changes_outcome,
    lower_literals,
    quote_ident,
    strip_number_formatting,
    swap_table,
    target_table,
    wrong_table_names,
)

MODES = ("format", "identifier", "value", "bare", "stall", "lose_track")
#: The functions of AgentBench's function-calling DBBench protocol (harnesses/dbbench-fc).
EXECUTE_SQL = "execute_sql"
COMMIT_FINAL_ANSWER = "commit_final_answer"
BASE_RATES: dict[str, float] = {
    "format": 0.15,
    "identifier": 0.20,
    "value": 0.35,
    "bare": 0.25,
    "stall": 0.15,
    "lose_track": 0.50,
}
DEFAULT_SKILL = 0.5


def effective_rates(skill: float, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Base rates scaled by ``2 * (1 - skill)`` and clipped to [0, 1]; overrides win unscaled."""
    return scaled_rates(BASE_RATES, skill, overrides)


@dataclass(frozen=True)
class Task:
    """The parts of a DBBench oracle the sim uses."""

    task_id: str
    kind: str  # "query" | "mutation"
    table: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str | None, ...], ...]  # None: a NULL cell
    label: tuple[str, ...]
    reference_sql: str
    description: str

    @classmethod
    def from_oracle(cls, oracle: Mapping[str, Any]) -> Task:
        label = [str(v) for v in oracle.get("label") or []]
        kind = str(oracle.get("kind") or "query")
        fallback = label[0] if kind == "mutation" and label else ""
        reference = oracle.get("reference_sql") or fallback
        return cls(
            task_id=str(oracle.get("task_id", "")),
            kind=kind,
            table=str(oracle.get("table_name") or "table"),
            columns=tuple(str(c) for c in oracle.get("columns") or []),
            rows=tuple(
                tuple(None if c is None else str(c) for c in row)
                for row in oracle.get("rows") or []
            ),
            label=tuple(label),
            reference_sql=str(reference),
            description=str(oracle.get("description") or ""),
        )


@dataclass(frozen=True)
class Plan:
    """Episode-level draws."""

    active: frozenset[str]
    format_turn: int
    wrong_tables: tuple[str, ...]
    value_sql: str | None
    wrong_value: str | None


def _rng(seed: int, task_id: str, *key: object) -> random.Random:
    return random.Random("|".join(str(k) for k in (seed, task_id, *key)))


def _normal(value: str) -> str:
    text = value.strip().strip("'\"").rstrip("%").replace(",", "")
    return "0" if text.lower() in ("", "none", "null", "nan") else text


def _same(a: str, b: str) -> bool:
    x, y = _normal(a), _normal(b)
    try:
        return abs(float(x) - float(y)) <= 0.01
    except ValueError:
        return x == y


def _value_mistake(task: Task) -> str | None:
    """The reference mutation written with the sim's value habits, if that changes the table.

    INSERT: numbers lose their thousands commas and trailing %. UPDATE: the same, and every
    string literal is lower-cased (SET values and WHERE keys).
    """
    ref = task.reference_sql
    keyword = ref.lstrip()[:6].upper()
    if keyword not in ("UPDATE", "INSERT"):
        return None
    variant = strip_number_formatting(ref)
    if keyword == "UPDATE":
        variant = lower_literals(variant)
    if changes_outcome(task.table, task.columns, task.rows, ref, variant):
        return variant
    return None


def plan_episode(task: Task, seed: int, rates: Mapping[str, float]) -> Plan:
    """Draw which modes are on for this (seed, task) and their details."""
    active: set[str] = set()
    format_turn = 0
    wrong_tables: tuple[str, ...] = ()
    value_sql: str | None = None
    wrong_value: str | None = None
    for mode in MODES:
        rng = _rng(seed, task.task_id, mode)
        if rng.random() >= rates.get(mode, 0.0):
            continue
        if mode == "format":
            format_turn = rng.randrange(2)
        elif mode == "identifier":
            wrong_tables = wrong_table_names(task.table, rng)
        elif mode == "value":
            value_sql = _value_mistake(task) if task.kind == "mutation" else None
            if value_sql is None:
                continue
        elif mode in ("bare", "lose_track") and task.kind != "query":
            continue
        elif mode == "lose_track":
            cells = sorted({c for row in task.rows for c in row if c and c.strip()})
            wrong = [c for c in cells if not any(_same(c, v) for v in task.label)]
            if not wrong:
                continue
            wrong_value = rng.choice(wrong)
        active.add(mode)
    return Plan(frozenset(active), format_turn, wrong_tables, value_sql, wrong_value)


@dataclass(frozen=True)
class Move:
    """One reply of the sim before it is written in a protocol: run ``sql``, answer
    ``values`` (as a list, or ``bare``: joined by ", "), or ``prose`` with no action."""

    kind: str  # "sql" | "answer" | "prose"
    thought: str
    sql: str = ""
    values: tuple[str, ...] = ()
    bare: bool = False


def _operation(thought: str, sql: str) -> Move:
    return Move("sql", thought, sql=sql)


def _answer(thought: str, values: Sequence[str], bare: bool = False) -> Move:
    return Move("answer", thought, values=tuple(values), bare=bare)


def as_text(move: Move) -> str:
    """The move in the text protocol (DBBench v0.2): ``Action: Operation`` and a ```sql
    block, or ``Action: Answer`` and ``Final Answer: [...]``."""
    if move.kind == "sql":
        return f"{move.thought}\nAction: Operation\n```sql\n{move.sql}\n```"
    if move.kind == "answer":
        values = list(move.values)
        shown = ", ".join(values) if move.bare else json.dumps(values, ensure_ascii=False)
        return f"{move.thought}\nAction: Answer\nFinal Answer: {shown}"
    return move.thought


def as_call(move: Move) -> str | dict[str, Any]:
    """The move in the function-calling protocol: the thought as content and one call of
    ``execute_sql(query)`` or ``commit_final_answer(answers)`` (a bare answer sends the
    joined string where the schema asks for an array); prose stays text with no call."""
    if move.kind == "sql":
        call = {"name": EXECUTE_SQL, "arguments": {"query": move.sql}}
    elif move.kind == "answer":
        answers: Any = ", ".join(move.values) if move.bare else list(move.values)
        call = {"name": COMMIT_FINAL_ANSWER, "arguments": {"answers": answers}}
    else:
        return move.thought
    return {"content": move.thought, "tool_calls": [call]}


def _prose(task: Task, turn: int) -> Move:
    named = [c for c in task.columns if c.strip()] or ["relevant"]
    column = named[turn % len(named)]
    return Move(
        "prose",
        f"Let me think about this before acting. The question seems to hinge on the {column} "
        "column, so I want to be sure which rows matter and what exactly is being asked "
        "before I touch the database.",
    )


def _stall_sql(task: Task, table: str, seed: int, turn: int) -> str:
    rng = _rng(seed, task.task_id, "stall", turn)
    t = quote_ident(table) if table == task.table else table
    column = quote_ident(rng.choice(task.columns)) if task.columns else "*"
    options = [
        f"SELECT COUNT(*) FROM {t}",
        f"SELECT DISTINCT {column} FROM {t}",
        f"SELECT * FROM {t} LIMIT {rng.randint(3, 10)}",
        f"SELECT {column}, COUNT(*) FROM {t} GROUP BY {column}",
    ]
    return rng.choice(options)


def next_reply(
    oracle: Mapping[str, Any], messages: Any, seed: int, rates: Mapping[str, float]
) -> str:
    """The sim's reply to ``messages`` for the task described by ``oracle``, in the text
    protocol."""
    return as_text(next_move(oracle, messages, seed, rates))


def next_call(
    oracle: Mapping[str, Any], messages: Any, seed: int, rates: Mapping[str, float]
) -> str | dict[str, Any]:
    """The same decision as ``next_reply`` for a harness that offers ``execute_sql`` and
    ``commit_final_answer``: the conversation's function calls are read as the text-protocol
    replies they stand for (``sim_signals.calls_as_text``), the move is written as a call."""
    return as_call(next_move(oracle, sig.calls_as_text(messages), seed, rates))


def next_move(
    oracle: Mapping[str, Any], messages: Any, seed: int, rates: Mapping[str, float]
) -> Move:
    """The sim's next move for the task described by ``oracle`` (see the module docstring)."""
    task = Task.from_oracle(oracle)
    plan = plan_episode(task, seed, rates)
    hist = generic.read_history(messages, task.description)
    turn = hist.turn

    if "format" in plan.active and (
        turn == plan.format_turn
        or (
            turn > plan.format_turn
            and sig.last_kind(hist) == "prose"
            and not sig.restates_format(hist.latest)
        )
    ):
        return _prose(task, turn)

    real = task.table.casefold()
    recovered = "identifier" not in plan.active or any(
        sig.reply_kind(r) == "sql"
        and (target_table(sig.sql_of(r) or "") or "").casefold() != real
        and sig.names_every_column(fb, task.columns)
        for r, fb in zip(hist.replies, hist.feedback, strict=True)
    )
    table = task.table if recovered else plan.wrong_tables[turn % len(plan.wrong_tables)]
    shown = quote_ident(table) if table == task.table else table
    main = "SELECT" if task.kind == "query" else ("INSERT", "UPDATE")
    main_done = any(
        (sql := sig.sql_of(r)) is not None
        and sql.lstrip().upper().startswith(main)
        and (target_table(sql) or "").casefold() == real
        for r in hist.replies
    )
    commit = turn >= 1 and generic.commit_signal(hist.latest)
    stalling = "stall" in plan.active and not commit

    if task.kind == "mutation":
        if main_done:
            return _answer("The change has been made.", [])
        if stalling:
            sql = f"SELECT * FROM {shown}" if turn == 0 else _stall_sql(task, table, seed, turn)
            return _operation("Before changing anything, let me look at the data.", sql)
        mistake = "value" in plan.active and not sig.shows_a_row(
            hist.initial, task.rows, task.description
        )
        sql = plan.value_sql if mistake and plan.value_sql else task.reference_sql
        if table != task.table:
            sql = swap_table(sql, table)
        return _operation("This statement makes the requested change.", sql)

    if not main_done:
        return _operation("I should first look at the rows of the table.", f"SELECT * FROM {shown}")
    if stalling:
        sql = _stall_sql(task, table, seed, turn)
        return _operation("Let me double-check the data before answering.", sql)
    values: Sequence[str] = task.label
    if "lose_track" in plan.active and plan.wrong_value and generic.saw_long_observation(hist):
        values = [plan.wrong_value]
    last = sig.last_kind(hist)
    bare = "bare" in plan.active and not (
        last == "answer" or (last == "bare" and sig.asks_for_list(hist.latest))
    )
    return _answer("I found what the question asks for.", values, bare=bare)


class SimDBBench(OracleSim):
    """``sim/dbbench`` as an offline policy plugin: the environment's oracle is its view."""

    description = "TEST DOUBLE: simulated DBBench agent with seeded failure modes"

    base_rates = BASE_RATES
    default_skill = DEFAULT_SKILL

    def reply(
        self,
        view: Mapping[str, Any],
        messages: Any,
        seed: int,
        params: Mapping[str, Any],
        tools: Any,
    ) -> str | dict[str, Any]:
        """Text, or function calls when the request offers DBBench's two functions."""
        rates = self.rates(params)
        if {EXECUTE_SQL, COMMIT_FINAL_ANSWER} <= generic.offered_functions(tools):
            return next_call(view, messages, seed, rates)
        return next_reply(view, messages, seed, rates)
