"""The table hash of host scoring, in a worker process the host can kill (run as a script
with ``python -I -S``: the standard library and DBBench's own SQL layer only).

The database was written by the harness: one SQLite step can run for minutes and allocate
gigabytes (a VIRTUAL generated column ``length(hex(zeroblob(400000000)))`` is one VM opcode,
which no progress handler interrupts). So the hash runs here, under the limits the host sends
on stdin (address space, CPU seconds, ``SQLITE_LIMIT_LENGTH``), and the host kills the worker
at its wall-clock limit (``harnessctl.envs.dbbench.scoring``).

Reads ``{"package_dir", "db", "table", "columns", "memory", "cpu_s", "max_length"}`` as JSON
on stdin; writes ``{"hash": ...}`` or ``{"error": ...}`` as JSON on stdout.
"""

import json
import resource
import sqlite3
import sys


def main() -> None:
    request = json.loads(sys.stdin.read())
    memory, cpu = int(request["memory"]), int(request["cpu_s"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    sys.path.insert(0, request["package_dir"])
    from hxenv_dbbench import sqlcompat

    table = request["table"]
    try:
        conn = sqlcompat.connect(request["db"], read_only=True)
        try:
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, int(request["max_length"]))
            kind = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,))
            row = kind.fetchone()
            if row is None or row[0] != "table":
                raise sqlite3.OperationalError(f"no such table: {table}")
            answer = {"hash": sqlcompat.table_hash(conn, table, request["columns"])}
        finally:
            conn.close()
    except (sqlite3.Error, sqlite3.Warning) as exc:
        answer = {"error": str(exc)}
    except MemoryError:
        answer = {"error": f"out of memory: scoring may use at most {memory} bytes"}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
