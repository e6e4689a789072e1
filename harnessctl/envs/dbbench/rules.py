"""The answer comparison of DBBench query tasks, in the versions AgentBench has used.

A run names its rules (``DBBenchEnvironment(rules=...)``, a suite's ``env_options: {rules:
...}``); every ``Score.detail`` says which it used, and the environment's ``version`` (part
of the rollout cache key) carries the name, so results under different rules never mix.

``agentbench-fc`` (the default): the comparison of AgentBench's current DBBench task, the
function-calling release (``src/server/tasks/dbbench/result_processor.py``,
``DBResultProcessor.compare_results``, main branch since commit 5bf4eb2, 2025-10). Every
value on both sides is cleaned, then compared:

1. a one-element tuple is unwrapped (``[('x',)]`` pasted from an observation); a one-element
   list is not (``[['x']]`` stays the string ``"['x']"``);
2. ``str(v)``, whitespace and surrounding quotes stripped;
3. a trailing ``%`` is dropped and ends the cleaning (``"1,000%"`` stays ``"1,000"``);
4. otherwise every comma is removed (``"1985, 1993"`` -> ``"1985 1993"``) unless the value
   starts with ``[`` or ends with ``]``;
5. ``none``/``null``/``undefined``/``nan``/``inf``/``infinity``/``-inf``/``-infinity`` (any
   case) and ``""`` become ``"0"``.

Then: one value on each side: equal, or both parse as floats within 0.01. Otherwise, when
every value on both sides parses as a float: the lists must have the same length and match
one to one within 0.01 (``['2', '2']`` against ``['2']`` fails; ``[]`` matches ``[]``).
Otherwise the two sides must be equal as sets of strings (order and repetition do not
matter, no float tolerance).

``v0.2``: the metric of AgentBench v0.2 (``src/server/tasks/dbbench/__init__.py``,
``DBBench.metrics``), on the raw values with no cleaning: one value on each side: equal as
floats when both convert, else equal as they are; otherwise equal as sets (``[1]`` is not
``['1']``; unhashable values never match).

Both versions read the final answer the same way (``scoring.parse_answer``): it must be a
list, as both protocols ask; anything else is an unparsable answer (``invalid_format``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FLOAT_TOLERANCE = 0.01
_SPECIAL = frozenset(
    {"none", "null", "undefined", "nan", "inf", "infinity", "-inf", "-infinity", ""}
)


@dataclass(frozen=True)
class Rules:
    """One version of the comparison."""

    name: str
    source: str
    """Where the rules come from (shown in docs and ``--help``)."""
    match: Callable[[list[Any], list[Any]], bool]
    """Does the parsed answer equal the label?"""
    clean: Callable[[Any], Any]
    """One value as the rules compare it (for the score detail)."""


def normalise_value(value: Any) -> str:
    """Steps 3-5 of ``agentbench-fc`` (``DBResultProcessor._normalize_special_values``)."""
    if value is None:
        return "0"
    text = str(value).strip()
    if text.endswith("%"):
        return text[:-1].strip()
    if "," in text and not text.startswith("[") and not text.endswith("]"):
        text = text.replace(",", "")
    return "0" if text.lower() in _SPECIAL else text


def clean_value(item: Any) -> str:
    """Steps 1-5 of ``agentbench-fc`` for one element of an answer or label list."""
    if isinstance(item, tuple) and len(item) == 1:
        item = item[0]
    return normalise_value(str(item).strip().strip("'\""))


def _is_float(text: str) -> bool:
    try:
        float(text)
    except (ValueError, TypeError, OverflowError):
        return False
    return True


def _float_equal(a: str, b: str) -> bool:
    try:
        return abs(float(a) - float(b)) <= FLOAT_TOLERANCE  # inf - inf is nan: not equal
    except (ValueError, TypeError, OverflowError):
        return False


def match_agentbench_fc(answer: list[Any], label: list[Any]) -> bool:
    """``agentbench-fc``: see the module docstring."""
    got = [clean_value(v) for v in answer]
    want = [clean_value(v) for v in label]
    if len(got) == 1 and len(want) == 1:
        a, b = got[0], want[0]
        if _is_float(a) and _is_float(b):
            return _float_equal(a, b)
        return a == b
    if all(_is_float(v) for v in got) and all(_is_float(v) for v in want):
        if len(got) != len(want):
            return False
        used = [False] * len(want)
        for a in got:  # greedy, first unused match, as the official loop does
            free = next((i for i, b in enumerate(want) if not used[i] and _float_equal(a, b)), None)
            if free is None:
                return False
            used[free] = True
        return all(used)
    return set(got) == set(want)


def match_v02(answer: list[Any], label: list[Any]) -> bool:
    """``v0.2``: see the module docstring."""
    if len(answer) == 1 and len(label) == 1:
        try:
            return float(answer[0]) == float(label[0])
        except (ValueError, TypeError, OverflowError):
            return bool(answer[0] == label[0])
    try:
        return set(answer) == set(label)
    except TypeError:  # an unhashable value (a nested list): v0.2 counts it wrong
        return False


AGENTBENCH_FC = Rules(
    name="agentbench-fc",
    source="AgentBench main, src/server/tasks/dbbench/result_processor.py (function calling)",
    match=match_agentbench_fc,
    clean=clean_value,
)
V02 = Rules(
    name="v0.2",
    source="AgentBench v0.2, src/server/tasks/dbbench/__init__.py (DBBench.metrics)",
    match=match_v02,
    clean=lambda value: value,
)
RULES: dict[str, Rules] = {rules.name: rules for rules in (AGENTBENCH_FC, V02)}
DEFAULT_RULES = AGENTBENCH_FC.name


def get_rules(name: str) -> Rules:
    """The rules called ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return RULES[name]
    except (KeyError, TypeError):
        known = ", ".join(RULES)
        raise ValueError(f"unknown DBBench rules {name!r} (known: {known})") from None
