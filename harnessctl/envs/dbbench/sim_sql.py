"""SQL text helpers for the simulated DBBench agent: find/swap the target table, make the
seeded value mistakes, guess wrong table names, and check on a scratch SQLite copy whether a
mistake changes the outcome. Standard library only; no parser, just literal-aware regexes
that are enough for the one-statement INSERT/UPDATE/SELECT the benchmark uses.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Sequence

_LITERAL = re.compile(r"'(?:[^']|'')*'")
_IDENT = r"(`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\"|\[[^\]]+\]|[A-Za-z_][\w$]*)"
_TARGET = re.compile(r"\b(?:FROM|INTO|UPDATE)\s+" + _IDENT, re.IGNORECASE)
# Numbers written with thousands separators and/or a trailing percent: "62,129", "99.8%".
_FORMATTED_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?")


def quote_ident(name: str) -> str:
    """Backtick-quote an identifier (SQLite and MySQL both accept backticks)."""
    return "`" + name.replace("`", "``") + "`"


def _unquote(ident: str) -> str:
    if ident[:1] == "`":
        return ident[1:-1].replace("``", "`")
    if ident[:1] == '"':
        return ident[1:-1].replace('""', '"')
    if ident[:1] == "[":
        return ident[1:-1]
    return ident


def _masked(sql: str) -> str:
    """``sql`` with the inside of every string literal blanked, same length (keeps offsets)."""
    return _LITERAL.sub(lambda m: "'" + "_" * (len(m.group()) - 2) + "'", sql)


def target_table(sql: str) -> str | None:
    """The table after the first FROM / INTO / UPDATE outside string literals, unquoted."""
    match = _TARGET.search(_masked(sql))
    return _unquote(sql[match.start(1) : match.end(1)]) if match else None


def swap_table(sql: str, table: str) -> str:
    """Replace the first FROM / INTO / UPDATE target with ``table`` (written bare if it can be)."""
    match = _TARGET.search(_masked(sql))
    if not match:
        return sql
    name = table if re.fullmatch(r"[A-Za-z_]\w*", table) else quote_ident(table)
    return sql[: match.start(1)] + name + sql[match.end(1) :]


def lower_literals(sql: str) -> str:
    """Lower-case every string literal (the UPDATE value mistake: SET values and WHERE keys)."""
    return _LITERAL.sub(lambda m: m.group().lower(), sql)


def strip_number_formatting(sql: str) -> str:
    """Drop thousands commas and trailing % from numeric-looking string literals."""

    def fix(match: re.Match[str]) -> str:
        inner = match.group()[1:-1]
        if _FORMATTED_NUMBER.fullmatch(inner) and ("," in inner or inner.endswith("%")):
            return "'" + inner.replace(",", "").rstrip("%") + "'"
        return match.group()

    return _LITERAL.sub(fix, sql)


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)
    words = [w.lower() for w in re.findall(r"[A-Za-z0-9]+", spaced)]
    return [("t" + w if w[0].isdigit() else w) for w in words] or ["data"]


def _toggle_plural(word: str) -> str:
    return word[:-1] if word.endswith("s") and len(word) > 3 else word + "s"


def wrong_table_names(real: str, rng: random.Random, count: int = 5) -> tuple[str, ...]:
    """Plausible snake_case guesses for ``real`` that are all wrong.

    A guess is kept only if it differs from the real name case-insensitively (SQLite table names
    are case-insensitive) and neither contains the other, so a guess never resolves by accident
    and a substring lookup cannot "fix" it. Generic names back the list up so it is never empty.
    """
    words = _words(real)
    base = "_".join(words)
    guesses = [
        base + "_tbl",
        "tbl_" + base,
        base + "_table",
        base + "_data",
        "_".join([*words[:-1], _toggle_plural(words[-1])]),
        "".join(words),
        words[0] + "_records",
        words[-1] + "_table",
        "_".join(words[:2]) + "_info",
        "main_table",
        "data_table",
        "records",
        "dataset",
        "entries",
        "main_data",
        "tbl1",
    ]
    folded = real.casefold()
    kept: list[str] = []
    for guess in guesses:
        low = guess.casefold()
        if low != folded and low not in folded and folded not in low and guess not in kept:
            kept.append(guess)
    rng.shuffle(kept)
    return tuple(kept[:count])


Rows = Sequence[Sequence[str | None]]


def _state_after(
    table: str, columns: Sequence[str], rows: Rows, sql: str, collation: str
) -> list[tuple[object, ...]]:
    db = sqlite3.connect(":memory:")
    try:
        cols = ", ".join(f"{quote_ident(c)} TEXT COLLATE {collation}" for c in columns)
        db.execute(f"CREATE TABLE {quote_ident(table)} ({cols})")
        marks = ", ".join("?" for _ in columns)
        db.executemany(f"INSERT INTO {quote_ident(table)} VALUES ({marks})", rows)
        db.execute(sql)
        return sorted(db.execute(f"SELECT * FROM {quote_ident(table)}").fetchall(), key=repr)
    finally:
        db.close()


def changes_outcome(
    table: str, columns: Sequence[str], rows: Rows, reference: str, variant: str
) -> bool:
    """Whether running ``variant`` instead of ``reference`` leaves a different table.

    Checked on scratch in-memory copies (TEXT columns, NULL for missing cells) under BOTH
    ``BINARY`` and ``NOCASE`` collation, and true only if the table differs under both, so the
    answer holds whichever way an environment emulates MySQL's case-insensitive comparisons.
    If the reference itself does not run here, fall back to "the text differs".
    """
    if variant == reference:
        return False
    for collation in ("BINARY", "NOCASE"):
        try:
            expected = _state_after(table, columns, rows, reference, collation)
        except sqlite3.Error:
            return True
        try:
            if _state_after(table, columns, rows, variant, collation) == expected:
                return False
        except sqlite3.Error:
            continue
    return True
