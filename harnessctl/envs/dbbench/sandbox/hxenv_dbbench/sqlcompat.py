"""SQLite with enough MySQL flavour to run DBBench, plus the official table checksum.

Standard library only: this module runs inside the sandbox (the agent's SQL tool) and on the
host (the scorer), so both sides see one implementation of the same semantics.

What ``connect`` adds to plain SQLite:

* MySQL functions SQLite lacks: ``CONCAT`` (NULL if any argument is NULL), ``CONCAT_WS``
  (skips NULLs), ``IF``, ``LEFT``, ``RIGHT``, ``MD5``, ``LOCATE``, ``SUBSTRING_INDEX``,
  ``LCASE``/``UCASE``, ``CHAR_LENGTH``, ``REGEXP_LIKE`` and the ``REGEXP`` operator
  (case-insensitive, as under MySQL's default collation; NULL in, NULL out).
* A wall-clock limit per statement (``STATEMENT_TIME_LIMIT_S``): a runaway query fails with
  an error instead of hanging the episode.

What ``execute`` adds: exactly one statement per call, errors returned rather than raised,
MySQL string escapes (``'Don\\'t'``) and ``LEFT(``/``RIGHT(`` calls made parseable by SQLite
(``translate``), and the MySQL inspection commands agents habitually send (``SHOW TABLES``,
``DESCRIBE t`` / ``DESC t`` / ``SHOW COLUMNS FROM t``, ``SHOW CREATE TABLE t``, and ``USE db``
as a no-op).

Known differences that remain (documented, not emulated): ``5/2`` is integer division in
SQLite (2.5 in MySQL); ``||`` concatenates in SQLite (logical OR in MySQL); numeric literals
stored in TEXT columns keep SQLite's rendering (``1.50`` becomes ``'1.5'``); comparisons are
case-insensitive only for ASCII (tables are built with ``COLLATE NOCASE``, see
``harnessctl.envs.dbbench.database``) and never accent-insensitive.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

STATEMENT_TIME_LIMIT_S = 5.0
OBSERVATION_LIMIT = 800
TRUNCATED = "[TRUNCATED]"
GROUP_CONCAT_MAX_LEN = 1024  # MySQL's default group_concat_max_len, part of the gold hash
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
    # MySQL's LOCATE follows the (case-insensitive) collation of its arguments.
    if substr is None or s is None or pos is None:
        return None
    start = max(int(pos), 1) - 1
    return _text(s).lower().find(_text(substr).lower(), start) + 1


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
    ("SUBSTRING_INDEX", 3, _substring_index),
    ("LCASE", 1, _case(str.lower)),
    ("UCASE", 1, _case(str.upper)),
    ("CHAR_LENGTH", 1, _char_length),
)


def connect(path: str, *, read_only: bool = False) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode with the MySQL functions and the statement time limit.

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
    for name, nargs, fn in _FUNCTIONS:
        conn.create_function(name, nargs, fn, deterministic=True)
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


def translate(sql: str) -> str:
    """Rewrite the MySQL spellings SQLite parses differently, outside quotes and comments.

    * ``'Don\\'t'``: MySQL backslash escapes in single-quoted strings become SQLite literals;
    * ``LEFT(...)`` / ``RIGHT(...)``: SQLite reads these as join keywords, so the function
      name is quoted (``"LEFT"(...)``), which SQLite accepts as a function call.
    """
    out: list[str] = []
    i = start = 0
    while i < len(sql):
        ch = sql[i]
        end: int | None = None  # index just past a literal, quoted name or comment
        replacement: str | None = None
        if ch == "'":
            literal = _mysql_string(sql, i)
            if literal is None:
                break
            replacement, end = "'" + literal[0].replace("'", "''") + "'", literal[1]
        elif ch in _QUOTES:
            close = sql.find(_QUOTES[ch], i + 1)
            end = len(sql) if close < 0 else close + 1
        elif sql.startswith("--", i):
            newline = sql.find("\n", i)
            end = len(sql) if newline < 0 else newline + 1
        elif sql.startswith("/*", i):
            close = sql.find("*/", i + 2)
            end = len(sql) if close < 0 else close + 2
        if end is None:
            i += 1
            continue
        out.append(_JOIN_KEYWORD_CALL.sub(r'"\1"\2', sql[start:i]))
        out.append(sql[i:end] if replacement is None else replacement)
        i = start = end
    out.append(_JOIN_KEYWORD_CALL.sub(r'"\1"\2', sql[start:i]) + sql[i:])
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
