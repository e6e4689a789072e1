"""Append-only, numbered schema migrations (``migrations/NNNN_name.sql``).

Each migration runs in its own transaction together with the row that records it in
``harnessctl_migrations``, so a migration is either applied and recorded or neither.
Concurrent openers are tolerated: on SQLite the write transaction serialises them and the
applied set is re-read inside it; on PostgreSQL a transaction-scoped advisory lock does the
same (DDL is transactional there too). On any other database a loser fails on the primary
key of ``harnessctl_migrations`` (or on the DDL itself), rolls back, and re-checks that the
winner applied the migration.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from sqlalchemy import Engine, inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from harnessctl.errors import HarnessctlError

from .engine import writer

MIGRATIONS_TABLE = "harnessctl_migrations"
_BOOTSTRAP = (
    f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
    "number INTEGER NOT NULL, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (number))"
)
# pg_advisory_xact_lock key serialising migrations across processes ("hxmigrat" as bytes).
PG_MIGRATION_LOCK = 0x68786D6967726174
_FILE_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One numbered migration: its DDL statements, in order."""

    number: int
    name: str
    statements: tuple[str, ...]


def split_statements(sql: str) -> tuple[str, ...]:
    """Split a migration file into statements: drop ``--`` comment lines, split on ``;``.

    Migrations are plain DDL, so a ``;`` never occurs inside a statement.
    """
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return tuple(s.strip() for s in "\n".join(lines).split(";") if s.strip())


def load_migrations(directory: Traversable | Path | None = None) -> list[Migration]:
    """Read ``NNNN_name.sql`` files, numbered 1, 2, 3... without gaps or repeats."""
    folder = directory if directory is not None else files("harnessctl.store") / "migrations"
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE_RE.match(entry.name)
        if match is None:
            if entry.name.endswith(".sql"):
                raise HarnessctlError(f"migration {entry.name}: name must be NNNN_name.sql")
            continue
        statements = split_statements(entry.read_text(encoding="utf-8"))
        found.append(Migration(int(match.group(1)), match.group(2), statements))
    found.sort(key=lambda m: m.number)
    numbers = [m.number for m in found]
    if numbers != list(range(1, len(found) + 1)):
        raise HarnessctlError(f"migrations must be numbered 1..N without gaps, got {numbers}")
    return found


def applied_numbers(conn: Connection) -> set[int]:
    """Numbers of the migrations recorded as applied."""
    rows = conn.execute(text(f"SELECT number FROM {MIGRATIONS_TABLE}"))
    return {int(row[0]) for row in rows}


def migrate(engine: Engine, migrations: list[Migration] | None = None) -> list[int]:
    """Apply pending migrations in order; return the numbers this call applied."""
    todo = load_migrations() if migrations is None else migrations
    where = engine.url.render_as_string(hide_password=True)
    _bootstrap(engine, where)
    with engine.connect() as conn:
        done = applied_numbers(conn)
    unknown = sorted(done - {m.number for m in todo})
    if unknown:
        raise HarnessctlError(
            f"store {where}: has migrations {unknown} that this harnessctl does not know; "
            "upgrade harnessctl"
        )
    applied: list[int] = []
    for migration in todo:
        if migration.number not in done and _apply(engine, migration, where):
            applied.append(migration.number)
    return applied


def _serialise(conn: Connection) -> None:
    """Make concurrent migrators queue for this transaction (SQLite: BEGIN IMMEDIATE did)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_MIGRATION_LOCK})


def _bootstrap(engine: Engine, where: str) -> None:
    try:
        with writer(engine).begin() as conn:
            _serialise(conn)
            conn.exec_driver_sql(_BOOTSTRAP)
    except DBAPIError as exc:
        # A concurrent opener may have created it between IF NOT EXISTS and CREATE.
        if not inspect(engine).has_table(MIGRATIONS_TABLE):
            raise HarnessctlError(
                f"store {where}: cannot create {MIGRATIONS_TABLE}: {exc}"
            ) from exc


def _apply(engine: Engine, migration: Migration, where: str) -> bool:
    """Apply one migration unless someone else has; return whether this call applied it."""
    label = f"{migration.number:04d}_{migration.name}"
    try:
        with writer(engine).begin() as conn:
            _serialise(conn)
            if migration.number in applied_numbers(conn):
                return False
            for statement in migration.statements:
                conn.exec_driver_sql(statement)
            conn.execute(
                text(
                    f"INSERT INTO {MIGRATIONS_TABLE} (number, name, applied_at) "
                    "VALUES (:number, :name, :applied_at)"
                ),
                {"number": migration.number, "name": migration.name, "applied_at": time.time()},
            )
        return True
    except DBAPIError as exc:
        with engine.connect() as conn:
            if migration.number in applied_numbers(conn):
                return False
        raise HarnessctlError(f"store {where}: migration {label} failed: {exc}") from exc
