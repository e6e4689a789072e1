"""The SQLAlchemy engine behind a store: SQLite tuned for concurrent writers, or any URL.

SQLite settings and why:
- WAL journal: readers never block the writer and vice versa.
- busy_timeout 30 s: a writer waits for the lock instead of failing with "database is locked".
- SQLAlchemy emits BEGIN itself (the sqlite3 module's legacy mode does not BEGIN before DDL,
  which would make migrations non-transactional). Write transactions use BEGIN IMMEDIATE:
  a deferred transaction that reads and then writes can fail with SQLITE_BUSY at once when
  another writer committed in between, without waiting; IMMEDIATE takes the write lock up
  front, so writers queue on busy_timeout instead.

Any other URL (PostgreSQL: ``postgresql+psycopg://user:pass@host/db``) gets a connection
pool sized for a worker pool of threads: ``POOL_SIZE`` kept-open connections plus up to
``MAX_OVERFLOW`` extra ones under load, each checked with a ping before use
(``pool_pre_ping``) so a connection the server dropped is replaced instead of failing a
write, and recycled after ``POOL_RECYCLE_S`` so idle-timeout proxies never hand back a dead
one. Concurrent writers need no lock there: the database's own unique constraints decide
races (see ``Store.record_rollout``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.pool import StaticPool

BUSY_TIMEOUT_MS = 30_000
POOL_SIZE = 10
MAX_OVERFLOW = 20
POOL_TIMEOUT_S = 30
POOL_RECYCLE_S = 1800
_WRITE_OPTION = "harnessctl_write"


def is_sqlite(url: URL) -> bool:
    """Whether a URL names a SQLite database (any driver)."""
    return url.get_backend_name() == "sqlite"


def _is_memory(url: URL) -> bool:
    return (url.database or "") in ("", ":memory:") or url.query.get("mode") == "memory"


def create_store_engine(url: str | URL) -> Engine:
    """Create the engine for ``url``; SQLite gets the settings described in this module."""
    parsed = make_url(url)
    if not is_sqlite(parsed):
        return create_engine(parsed, **pool_options())
    kwargs: dict[str, Any] = {
        "connect_args": {"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000}
    }
    if _is_memory(parsed):
        # One shared connection, or every pooled connection would see its own empty database.
        kwargs["poolclass"] = StaticPool
    elif parsed.database and not parsed.database.startswith("file:"):
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed, **kwargs)
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def pool_options() -> dict[str, Any]:
    """Connection-pool settings for server databases (everything but SQLite)."""
    return {
        "pool_size": POOL_SIZE,
        "max_overflow": MAX_OVERFLOW,
        "pool_timeout": POOL_TIMEOUT_S,
        "pool_recycle": POOL_RECYCLE_S,
        "pool_pre_ping": True,
    }


def writer(engine: Engine) -> Engine:
    """A view of ``engine`` whose transactions are write transactions (BEGIN IMMEDIATE)."""
    return engine.execution_options(**{_WRITE_OPTION: True})


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Hand transaction control to SQLAlchemy (see _sqlite_on_begin).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        # NORMAL is durable across application crashes in WAL mode, and much faster than FULL.
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    immediate = conn.get_execution_options().get(_WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
