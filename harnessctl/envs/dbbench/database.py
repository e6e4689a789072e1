"""Building a DBBench task's table in SQLite, the way the official init builds it in MySQL.

The official init creates one table named ``table.table_name`` with one ``TEXT`` column per
``table.table_info.columns[*].name`` and inserts every row through driver parameters. We do
the same, so a value lands in the table as MySQL would store it in a TEXT column:

* strings as they are; numbers as ``str(v)`` (``1983`` -> ``'1983'``, ``2.5`` -> ``'2.5'``);
* ``null`` stays NULL (the driver sends NULL; the checksum then skips it like CONCAT_WS does);
* booleans as ``'1'``/``'0'`` (the driver sends TRUE/FALSE, which MySQL stores as 1/0).

The dev split holds only strings and integers, and with these rules all 40 INSERT/UPDATE
reference SQLs reproduce their ``answer_md5``.

One deliberate addition: every column is ``TEXT COLLATE utf8mb4_0900_ai_ci``, MySQL 8's
default collation as ``sqlcompat`` imitates it: ``WHERE Name = 'jose'`` matches ``'José'`` as
it does on MySQL (the stored values, and so the checksum, are unchanged). The collation is
registered by ``sqlcompat.register`` (the SQL tool, the scorer and this builder all use it); a
plain SQLite client can read the file but refuses a comparison on these columns with "no such
collation sequence" rather than compare differently.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from .sandbox.hxenv_dbbench import sqlcompat
from .sandbox.hxenv_dbbench.sqlcompat import quote_ident


def cell_text(value: Any) -> str | None:
    """How a JSON cell is stored in the TEXT column (see the module docstring)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def column_names(record: dict[str, Any]) -> list[str]:
    """The table's column names, in order."""
    return [column["name"] for column in record["table"]["table_info"]["columns"]]


def table_rows(record: dict[str, Any]) -> list[list[str | None]]:
    """The table's rows as they are stored."""
    return [[cell_text(v) for v in row] for row in record["table"]["table_info"]["rows"]]


def create_table_sql(record: dict[str, Any]) -> str:
    """The CREATE TABLE statement for the record's table."""
    collated = f"TEXT COLLATE {sqlcompat.COLLATION}"
    columns = ", ".join(f"{quote_ident(c)} {collated}" for c in column_names(record))
    return f"CREATE TABLE {quote_ident(record['table']['table_name'])} ({columns})"


def build_database(record: dict[str, Any], path: Path) -> None:
    """Write a fresh SQLite file at ``path`` holding the record's table and nothing else.

    Built in a temporary file next to ``path`` and moved into place, so ``path`` is never a
    half-written database and an existing file (or symlink) there is replaced, not followed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".db-", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        conn = sqlite3.connect(tmp)
        sqlcompat.register(conn)
        try:
            # a scratch file, moved into place only once complete: no journal and no fsync
            # (they were a third of a simulated rollout's host time)
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            names = column_names(record)
            table = quote_ident(record["table"]["table_name"])
            marks = ", ".join("?" for _ in names)
            cols = ", ".join(quote_ident(c) for c in names)
            with conn:
                conn.execute(create_table_sql(record))
                conn.executemany(
                    f"INSERT INTO {table} ({cols}) VALUES ({marks})", table_rows(record)
                )
        finally:
            conn.close()
        for suffix in ("-journal", "-wal", "-shm"):  # a stale journal would be replayed
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
