"""SQLite with enough MySQL 8 flavour to run DBBench, plus the official table checksum.

Standard library only: this module runs inside the sandbox (the agent's SQL tool) and on the
host (the table builder and the scorer), so both sides see one implementation of the same
semantics. AgentBench runs DBBench on MySQL 8 (``mysql:8``), whose default collation is
``utf8mb4_0900_ai_ci``; the rules below imitate it (docs/dbbench.md lists them).

What ``register`` (called by ``connect``) adds to plain SQLite:

* The collation ``utf8mb4_0900_ai_ci`` (:func:`fold`): case- and accent-insensitive
  (``'Cafe' = 'café'``), NO PAD like every 0900 collation (trailing spaces count), ordering
  spaces and punctuation before digits before letters as the Unicode collation does. Tables
  are built with it on every column (``harnessctl.envs.dbbench.database``), so ``=``, ``IN``,
  ``ORDER BY``, ``GROUP BY``, ``DISTINCT``, ``MIN``/``MAX`` on a column follow it.
* ``LIKE`` as MySQL matches it: per character under the same folding (``'Café' LIKE 'caf%'``),
  ``\\`` as the default escape character, trailing spaces significant.
* MySQL functions SQLite lacks or spells differently: ``CONCAT`` (NULL if any argument is
  NULL), ``CONCAT_WS`` (skips NULLs), ``IF``, ``LEFT``, ``RIGHT``, ``MD5``, ``LOCATE`` and
  ``INSTR`` (under the collation), ``SUBSTRING_INDEX``, ``LOWER``/``UPPER``/``LCASE``/``UCASE``
  (every letter, not ASCII only), ``CHAR_LENGTH``, ``REGEXP_LIKE`` and the ``REGEXP`` operator
  (case-insensitive, as under MySQL's default collation; NULL in, NULL out).

What ``connect`` adds besides: a wall-clock limit per statement (``STATEMENT_TIME_LIMIT_S``):
a runaway query fails with an error instead of hanging the episode.

What ``execute`` adds: exactly one statement per call, errors returned rather than raised,
and the MySQL spellings SQLite parses differently (``translate``): string escapes
(``'Don\\'t'``), ``LEFT(``/``RIGHT(`` calls, unquoted identifiers that begin with a digit
(``1999_Season_Results``), and a string literal compared with ``=``, ``<>``, ``<`` ... carrying
the collation explicitly (MySQL compares literals and function results under the connection's
collation too: ``'Cafe' = 'Café'`` and ``LOWER(Name) = 'josé'``). Also the MySQL inspection
commands agents habitually send (``SHOW TABLES``, ``DESCRIBE t`` / ``DESC t`` / ``SHOW COLUMNS
FROM t``, ``SHOW CREATE TABLE t``, and ``USE db`` as a no-op).

Known differences that remain (documented, not emulated): ``5/2`` is integer division in
SQLite (2.5 in MySQL); ``||`` concatenates in SQLite (logical OR in MySQL); numeric literals
stored in TEXT columns keep SQLite's rendering (``1.50`` becomes ``'1.5'``); the collation
folds by Unicode decomposition, not by the full UCA 9.0.0 weight table (``'æ'`` is not
``'ae'``, ``'ø'`` is not ``'o'``); tables an agent creates get SQLite's BINARY collation
unless it names one; ``REGEXP`` is not accent-insensitive; a string literal in ``IN (...)`` or
``BETWEEN`` follows the left operand's collation (BINARY for a function result).
"""

from __future__ import annotations

import functools
import hashlib
import re
import sqlite3
import time
import unicodedata
import urllib.parse
from collections.abc import Callable
from typing import Any

STATEMENT_TIME_LIMIT_S = 5.0
OBSERVATION_LIMIT = 800
TRUNCATED = "[TRUNCATED]"
GROUP_CONCAT_MAX_LEN = 1024  # MySQL's default group_concat_max_len, part of the gold hash
#: MySQL 8's default collation, registered under its own name (a client that has not
#: registered it gets "no such collation sequence" instead of silently different results).
COLLATION = "utf8mb4_0900_ai_ci"
_PROGRESS_EVERY = 1000  # VM instructions between time checks: cheap, still fine-grained

Rows = list[tuple[Any, ...]]


def quote_ident(name: str) -> str:
    """Quote an identifier for SQLite (double quotes, embedded quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


def _text(value: Any) -> str:
    """How MySQL turns a value into a string for string functions."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _truthy(value: Any) -> bool:
    """MySQL truthiness: NULL is false, strings count by their leading number ('1abc' is 1)."""
    if value is None:
        return False
    if isinstance(value, int | float):
        return value != 0
    match = re.match(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", _text(value))
    return match is not None and float(match.group(0)) != 0


def _concat(*args: Any) -> str | None:
    if any(a is None for a in args):
        return None
    return "".join(_text(a) for a in args)


def _concat_ws(sep: Any, *args: Any) -> str | None:
    if sep is None:
        return None
    return _text(sep).join(_text(a) for a in args if a is not None)


def _if(cond: Any, a: Any, b: Any) -> Any:
    return a if _truthy(cond) else b


def _left(s: Any, n: Any) -> str | None:
    if s is None or n is None:
        return None
    return _text(s)[: max(int(n), 0)]


def _right(s: Any, n: Any) -> str | None:
    if s is None or n is None:
        return None
    k = int(n)
    return _text(s)[-k:] if k > 0 else ""


def _md5(s: Any) -> str | None:
    if s is None:
        return None
    data = s if isinstance(s, bytes) else _text(s).encode("utf-8")
    return hashlib.md5(data).hexdigest()


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def _regexp(pattern: Any, value: Any) -> int | None:
    # SQLite rewrites `value REGEXP pattern` to regexp(pattern, value).
    if pattern is None or value is None:
        return None
    return int(_compiled(_text(pattern)).search(_text(value)) is not None)


def _regexp_like(value: Any, pattern: Any) -> int | None:
    return _regexp(pattern, value)


def _locate(substr: Any, s: Any, pos: Any = 1) -> int | None:
    # MySQL's LOCATE follows the (case- and accent-insensitive) collation of its arguments.
    if substr is None or s is None or pos is None:
        return None
    start = max(int(pos), 1) - 1
    return fold_chars(_text(s)).find(fold_chars(_text(substr)), start) + 1


def _instr(s: Any, substr: Any) -> int | None:
    return _locate(substr, s)


def _substring_index(s: Any, delim: Any, count: Any) -> str | None:
    if s is None or delim is None or count is None:
        return None
    text, sep, n = _text(s), _text(delim), int(count)
    if not sep or n == 0:
        return ""
    parts = text.split(sep)
    return sep.join(parts[:n] if n > 0 else parts[n:])


def _case(fn: Callable[[str], str]) -> Callable[[Any], str | None]:
    return lambda s: None if s is None else fn(_text(s))


def _char_length(s: Any) -> int | None:
    return None if s is None else len(_text(s))


@functools.lru_cache(maxsize=8192)
def fold(text: str) -> str:
    """The comparison form of ``text`` under ``utf8mb4_0900_ai_ci``, approximated: case
    folded (``ß`` -> ``ss``), compatibility-decomposed and stripped of accents (``É`` -> ``e``,
    ``ﬁ`` -> ``fi``). Trailing spaces are kept: the 0900 collations are NO PAD."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _rank(ch: str) -> int:
    # The Unicode collation orders spaces and punctuation, then digits, then letters.
    return 2 if ch.isalpha() else 1 if ch.isdigit() else 0


@functools.lru_cache(maxsize=8192)
def sort_key(text: str) -> tuple[tuple[int, str], ...]:
    """Where ``text`` sorts under the collation; equal keys exactly when the folds are equal."""
    return tuple((_rank(ch), ch) for ch in fold(text))


def collate(a: str, b: str) -> int:
    """The ``utf8mb4_0900_ai_ci`` collation function SQLite calls."""
    ka, kb = sort_key(a), sort_key(b)
    return (ka > kb) - (ka < kb)


@functools.lru_cache(maxsize=4096)
def _fold_char(ch: str) -> str:
    folded = fold(ch)
    return folded if len(folded) == 1 else ch.lower()


def fold_chars(text: str) -> str:
    """``fold`` one character at a time, so the length stays (LIKE and LOCATE count
    characters, as MySQL's do)."""
    return "".join(_fold_char(ch) for ch in text)


@functools.lru_cache(maxsize=256)
def _like_pattern(pattern: str, escape: str) -> re.Pattern[str]:
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape and i + 1 < len(pattern):
            parts.append(re.escape(_fold_char(pattern[i + 1])))
            i += 2
            continue
        parts.append(".*" if ch == "%" else "." if ch == "_" else re.escape(_fold_char(ch)))
        i += 1
    return re.compile("".join(parts), re.DOTALL)


def _like(pattern: Any, value: Any, escape: Any = "\\") -> int | None:
    # SQLite rewrites `value LIKE pattern [ESCAPE e]` to like(pattern, value[, e]).
    if pattern is None or value is None or escape is None:
        return None
    esc = _text(escape)
    if len(esc) != 1:
        raise ValueError("ESCAPE expression must be a single character")
    return int(_like_pattern(_text(pattern), esc).fullmatch(fold_chars(_text(value))) is not None)


_FUNCTIONS: tuple[tuple[str, int, Callable[..., Any]], ...] = (
    ("CONCAT", -1, _concat),
    ("CONCAT_WS", -1, _concat_ws),
    ("IF", 3, _if),
    ("LEFT", 2, _left),
    ("RIGHT", 2, _right),
    ("MD5", 1, _md5),
    ("REGEXP", 2, _regexp),
    ("REGEXP_LIKE", 2, _regexp_like),
    ("LOCATE", 2, _locate),
    ("LOCATE", 3, _locate),
    ("INSTR", 2, _instr),
    ("LIKE", 2, _like),
    ("LIKE", 3, _like),
    ("SUBSTRING_INDEX", 3, _substring_index),
    ("LCASE", 1, _case(str.lower)),
    ("UCASE", 1, _case(str.upper)),
    ("LOWER", 1, _case(str.lower)),
    ("UPPER", 1, _case(str.upper)),
    ("CHAR_LENGTH", 1, _char_length),
)


def register(conn: sqlite3.Connection) -> None:
    """Give ``conn`` the MySQL collation and functions (the module docstring lists them)."""
    conn.create_collation(COLLATION, collate)
    for name, nargs, fn in _FUNCTIONS:
        conn.create_function(name, nargs, fn, deterministic=True)


def connect(path: str, *, read_only: bool = False) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode with the MySQL collation and functions (``register``)
    and the statement time limit.

    ``read_only`` opens through the URI ``file:...?mode=ro`` (host scoring): nothing can be
    written, and the schema is not trusted to call functions from views or triggers.
    """
    if read_only:
        uri = "file:" + urllib.parse.quote(path, safe="/") + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA trusted_schema = OFF")
    else:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    register(conn)
    _install_time_limit(conn, STATEMENT_TIME_LIMIT_S)
    return conn


def _install_time_limit(conn: sqlite3.Connection, limit_s: float) -> None:
    # The trace callback fires when a statement starts running, whoever runs it (our
    # execute() or harness code calling conn.execute directly); the progress handler then
    # aborts it once it has run for limit_s, fetches included.
    started = [time.monotonic()]

    def on_statement(sql: str) -> None:
        if not sql.lstrip().startswith("--"):  # "-- TRIGGER x" lines must not reset the clock
            started[0] = time.monotonic()

    def on_progress() -> int:
        return int(time.monotonic() - started[0] > limit_s)

    conn.set_trace_callback(on_statement)
    conn.set_progress_handler(on_progress, _PROGRESS_EVERY)


_IDENT = r"(`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\"|\[[^\]]+\]|[^\s;`\"]+)"
_SHOW_TABLES = re.compile(r"^\s*SHOW\s+(?:FULL\s+)?TABLES\s*;?\s*$", re.IGNORECASE)
_DESCRIBE = re.compile(
    r"^\s*(?:DESCRIBE|DESC|SHOW\s+(?:FULL\s+)?(?:COLUMNS|FIELDS)\s+(?:FROM|IN))\s+"
    + _IDENT
    + r"\s*;?\s*$",
    re.IGNORECASE,
)
_SHOW_CREATE = re.compile(r"^\s*SHOW\s+CREATE\s+TABLE\s+" + _IDENT + r"\s*;?\s*$", re.I)
_USE = re.compile(r"^\s*USE\s+" + _IDENT + r"\s*;?\s*$", re.IGNORECASE)


_MYSQL_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_JOIN_KEYWORD_CALL = re.compile(r"\b(LEFT|RIGHT)(\s*\()", re.IGNORECASE)
_QUOTES = {'"': '"', "`": "`", "[": "]"}


def _mysql_string(sql: str, start: int) -> tuple[str, int] | None:
    """Read the MySQL string literal opening at ``start``: (its value, index after it)."""
    chars: list[str] = []
    i = start + 1
    while i < len(sql):
        ch = sql[i]
        if ch == "\\" and i + 1 < len(sql):
            nxt = sql[i + 1]
            # \% and \_ keep their backslash in MySQL (they are LIKE escapes)
            chars.append("\\" + nxt if nxt in "%_" else _MYSQL_ESCAPES.get(nxt, nxt))
            i += 2
        elif ch == "'" and sql.startswith("''", i):
            chars.append("'")
            i += 2
        elif ch == "'":
            return "".join(chars), i + 1
        else:
            chars.append(ch)
            i += 1
    return None  # unterminated: left for SQLite to report


def _segments(sql: str) -> list[tuple[str, str]]:
    """``sql`` cut into ``(kind, text)``: ``code``, ``string`` (already a SQLite literal),
    ``quoted`` (a quoted name), ``comment``, and ``rest``: everything from an unterminated
    string on, left as it is for SQLite to report."""
    out: list[tuple[str, str]] = []
    i = start = 0
    while i < len(sql):
        ch = sql[i]
        end: int | None = None  # index just past a literal, quoted name or comment
        kind, text = "", ""
        if ch == "'":
            literal = _mysql_string(sql, i)
            if literal is None:  # unterminated: the rest goes to SQLite as it is
                out += [("code", sql[start:i]), ("rest", sql[i:])]
                return [(kind, text) for kind, text in out if text]
            kind, text, end = "string", "'" + literal[0].replace("'", "''") + "'", literal[1]
        elif ch in _QUOTES:
            close = sql.find(_QUOTES[ch], i + 1)
            end = len(sql) if close < 0 else close + 1
            kind = "quoted"
        elif sql.startswith("--", i):
            newline = sql.find("\n", i)
            end = len(sql) if newline < 0 else newline + 1
            kind = "comment"
        elif sql.startswith("/*", i):
            close = sql.find("*/", i + 2)
            end = len(sql) if close < 0 else close + 2
            kind = "comment"
        if end is None:
            i += 1
            continue
        out.append(("code", sql[start:i]))
        out.append((kind, text or sql[i:end]))
        i = start = end
    out.append(("code", sql[start:]))
    return [(kind, text) for kind, text in out if text]


_DIGIT_WORD = re.compile(r"(?<![\w$])\d+[^\W\d][\w$]*|(?<![\w$])\d+\$[\w$]*")
_NUMBER_WORD = re.compile(r"\d+[eE]\d*|0[xX][0-9a-fA-F]+|0[bB][01]+")
_CMP_BEFORE = re.compile(r"(?:=|<|>)\s*$")
_CMP_AFTER = re.compile(r"^\s*(?:=|<|>|!=)")


def _digit_names(code: str) -> str:
    """Backtick the words MySQL reads as identifiers that begin with a digit
    (``1999_Season_Results``); numbers (``1e5``, ``0x1F``) and decimals (``1.5e3``) stay."""

    def fix(match: re.Match[str]) -> str:
        word = match.group()
        before = code[: match.start()]
        if _NUMBER_WORD.fullmatch(word) or re.search(r"(?<![\w$])\d+\.$", before):
            return word
        return f"`{word}`"

    return _DIGIT_WORD.sub(fix, code)


def _code(code: str) -> str:
    return _digit_names(_JOIN_KEYWORD_CALL.sub(r'"\1"\2', code))


def _compared(segments: list[tuple[str, str]], index: int) -> bool:
    """Whether the string at ``index`` is an operand of ``=``, ``<>``, ``!=``, ``<``, ``>``,
    ``<=`` or ``>=`` (comments between are skipped)."""
    seen = [(i, kind, text) for i, (kind, text) in enumerate(segments) if kind != "comment"]
    at = next(n for n, (i, _, _) in enumerate(seen) if i == index)
    before = seen[at - 1] if at > 0 else None
    after = seen[at + 1] if at + 1 < len(seen) else None
    return (before is not None and before[1] == "code" and bool(_CMP_BEFORE.search(before[2]))) or (
        after is not None and after[1] == "code" and bool(_CMP_AFTER.match(after[2]))
    )


def translate(sql: str) -> str:
    """Rewrite the MySQL spellings SQLite parses differently, outside quotes and comments.

    * ``'Don\\'t'``: MySQL backslash escapes in single-quoted strings become SQLite literals;
    * ``LEFT(...)`` / ``RIGHT(...)``: SQLite reads these as join keywords, so the function
      name is quoted (``"LEFT"(...)``), which SQLite accepts as a function call;
    * ``1999_Season_Results``: an unquoted name that begins with a digit is backticked;
    * ``Name = 'josé'``: a string literal that is an operand of a comparison gets
      ``COLLATE utf8mb4_0900_ai_ci`` (not in ``PRAGMA`` statements, where SQLite refuses it).
    """
    segments = _segments(sql)
    pragma = sql.lstrip()[:6].upper() == "PRAGMA"
    out: list[str] = []
    for index, (kind, text) in enumerate(segments):
        if kind == "code":
            out.append(_code(text))
        elif kind == "string" and not pragma and _compared(segments, index):
            out.append(f"{text} COLLATE {COLLATION}")
        else:
            out.append(text)
    return "".join(out)


def _unquote(ident: str) -> str:
    if ident[0] == "`":
        return ident[1:-1].replace("``", "`")
    if ident[0] == '"':
        return ident[1:-1].replace('""', '"')
    if ident[0] == "[":
        return ident[1:-1]
    return ident


def _rewrite(sql: str) -> tuple[str, tuple[Any, ...]] | None:
    """Translate the MySQL inspection commands SQLite does not know; None if not one."""
    if _SHOW_TABLES.match(sql):
        return (
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
            (),
        )
    match = _DESCRIBE.match(sql)
    if match:
        # The shape of MySQL's DESCRIBE: (Field, Type, Null, Key, Default, Extra).
        return (
            "SELECT name, lower(type), CASE WHEN \"notnull\" THEN 'NO' ELSE 'YES' END, "
            "CASE WHEN pk THEN 'PRI' ELSE '' END, dflt_value, '' "
            "FROM pragma_table_info(?) ORDER BY cid",
            (_unquote(match.group(1)),),
        )
    match = _SHOW_CREATE.match(sql)
    if match:  # MySQL answers (Table, Create Table)
        return (
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name = ?",
            (_unquote(match.group(1)),),
        )
    if _USE.match(sql):
        return ("SELECT 1 WHERE 0", ())  # one database per task: USE has nothing to switch
    return None


def execute(conn: sqlite3.Connection, sql: str) -> tuple[bool, Rows | str]:
    """Run exactly one statement: ``(True, rows)`` or ``(False, error text)``; never raises
    for SQL errors (several statements, syntax, missing objects, time limit)."""
    if not sql.strip().strip(";").strip():
        return False, "empty statement"
    rewritten = _rewrite(sql)
    try:
        if rewritten is None:
            return True, conn.execute(translate(sql)).fetchall()
        query, params = rewritten
        rows = conn.execute(query, params).fetchall()
        if params and not rows:  # DESCRIBE / SHOW CREATE of a table that is not there
            return False, f"no such table: {params[0]}"
        return True, rows
    except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError) as exc:
        message = str(exc)
        if message == "interrupted":
            message = f"interrupted: statement exceeded the {STATEMENT_TIME_LIMIT_S:g} s limit"
        return False, message


def observation(ok: bool, payload: Rows | str, limit: int = OBSERVATION_LIMIT) -> str:
    """The DBBench observation: ``str(rows)`` or the error text, cut to ``limit`` characters
    followed by ``[TRUNCATED]``."""
    text = str(payload)  # rows as Python prints them, or the error text as is
    return text[:limit] + TRUNCATED if len(text) > limit else text


def _row_bytes(row: tuple[Any, ...]) -> bytes:
    # CONCAT_WS(',', col...) as MySQL computes it: NULLs skipped, text as utf-8.
    parts = [v if isinstance(v, bytes) else str(v).encode("utf-8") for v in row if v is not None]
    return b",".join(parts)


def table_hash(
    conn: sqlite3.Connection, table_name: str, columns: list[str] | None = None
) -> str | None:
    """The AgentBench DBBench checksum of a table, as its checker computes it in MySQL::

        md5(group_concat(rowhash ORDER BY rowhash))
        FROM (SELECT substring(md5(concat_ws(',', col...)), 1, 5) AS rowhash FROM t)

    ``columns`` defaults to the table's own columns in order (the checker names the task's
    columns). group_concat stops at 1024 characters. An empty table hashes to None, as
    ``md5(NULL)`` does in MySQL. Raises ``sqlite3.Error`` if the table or a column is missing.
    """
    if columns is None:
        info = conn.execute("SELECT name FROM pragma_table_info(?) ORDER BY cid", (table_name,))
        columns = [r[0] for r in info.fetchall()]
        if not columns:
            raise sqlite3.OperationalError(f"no such table: {table_name}")
    select = ", ".join(quote_ident(c) for c in columns)
    cursor = conn.execute(f"SELECT {select} FROM {quote_ident(table_name)}")
    rowhashes = sorted(hashlib.md5(_row_bytes(row)).hexdigest()[:5] for row in cursor)
    if not rowhashes:
        return None
    joined = ",".join(rowhashes)[:GROUP_CONCAT_MAX_LEN]
    return hashlib.md5(joined.encode("ascii")).hexdigest()
