"""Bounded reads of a read-through cache: what a cache can make the host read, build and wait for.

A cache (``store.readthrough``) is a directory someone else wrote. Everything here assumes
it is hostile and bounds each cost *before* paying it:

- **files**: only regular files are opened (no symlink as the last component, no FIFO, no
  device: opened non-blocking and checked with ``fstat``), the SQLite file's sidecars
  (``-wal``, ``-shm``, ``-journal``, which SQLite opens by itself) included;
- **bytes**: a compressed trajectory is read up to :data:`MAX_TRAJECTORY_BYTES`, inflated
  up to the same, and any one SQLite value is at most :data:`MAX_VALUE_BYTES`
  (``SQLITE_LIMIT_LENGTH``: a larger one fails before it is built);
- **objects**: the JSON's values and containers are counted on its bytes while it is
  inflated, before it is parsed (:data:`MAX_TRAJECTORY_VALUES`,
  :data:`MAX_TRAJECTORY_CONTAINERS`): a 14 KB gzip of ``{},{},...`` inflates to 14 MB and
  parses into 4.6 million dicts (700 MB of host memory) and is refused after 1.5 MB;
- **time**: every statement runs under one budget per lookup (:data:`QUERY_SECONDS`, a
  SQLite progress handler interrupts it), and the schema must be exactly this harnessctl's
  (no view, trigger, virtual table or generated column: nothing but data to evaluate).

A breach of any bound raises :class:`CacheBreach`: the cache is not one this harnessctl
wrote, and the caller skips all of it.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from harnessctl.bounds import MAX_RECORD_BYTES, MAX_RECORDS, MiB
from harnessctl.errors import HarnessctlError

MAX_TRAJECTORY_BYTES = 64 * MiB
"""A cached trajectory's file and its inflated JSON, each (the gateway keeps at most
``bounds.MAX_RECORD_BYTES`` of one rollout's records; the events, tails and score add less
than 8 MiB)."""
MAX_TRAJECTORY_VALUES = 2_000_000
"""JSON values in one cached trajectory, counted as commas, brackets and braces (an upper
bound: those in strings count too): the gateway's 32 MiB of records hold at most this many
token ids with their logprobs (``12345,-0.1234567,``: 16 bytes a pair)."""
MAX_TRAJECTORY_CONTAINERS = 500_000
"""JSON objects and arrays in one cached trajectory (the costly values: an empty dict is 64
bytes of host memory for 3 bytes of JSON), counted as ``{`` and ``[``: 32 MiB of records
hold at most this many of the smallest message (``{"role":"user","content":"..."}``)."""
MAX_VALUE_BYTES = 8 * MiB
"""Any one string or blob read from a cache's SQLite file (``bounds.MAX_BODY_BYTES``)."""
MAX_ROW_BYTES = 256 * 1024
"""A cached rollout row, all its values together (its error keeps two 4000-byte tails)."""
MAX_CALLS = MAX_RECORDS
"""Model-call rows of one cached rollout (the gateway keeps at most this many records)."""
MAX_CALL_BYTES = MAX_RECORD_BYTES
"""... and their values together."""
QUERY_SECONDS = 20.0
"""SQL time one lookup may spend in a cache, all its statements together (an indexed lookup
of 500 keys takes milliseconds); past it the statement is interrupted."""
_CHUNK = 1 << 20
_PROGRESS_OPS = 1000  # SQLite VM instructions between two looks at the clock
_SIDECARS = ("-wal", "-shm", "-journal")


class CacheBreach(HarnessctlError):
    """The cache broke a bound or is not shaped as this harnessctl writes a store: skip it."""


class Budget:
    """Seconds of SQL one lookup may spend, counted only while a statement runs (a lookup is
    a generator: the time its consumer takes between rows is not the cache's)."""

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = QUERY_SECONDS if seconds is None else seconds
        self.used = 0.0
        self._since: float | None = None

    def spent(self) -> int:
        """Non-zero once the time is up: SQLite's progress handler, which then interrupts
        the statement."""
        since = self._since
        return int(since is not None and self.used + time.monotonic() - since > self.seconds)

    @contextmanager
    def running(self) -> Iterator[None]:
        self._since = time.monotonic()
        try:
            yield
        finally:
            self.used += time.monotonic() - self._since
            self._since = None


def regular_or_absent(path: Path) -> None:
    """Refuse ``path`` unless it is missing or a regular file (a FIFO would block its opener)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CacheBreach(f"{path}: cannot be examined ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise CacheBreach(f"{path}: not a regular file")


def connect(db: Path, budget: Budget) -> sqlite3.Connection:
    """The cache's SQLite file opened read-only, every value and statement bounded."""
    for path in (db, *(db.with_name(db.name + s) for s in _SIDECARS)):
        regular_or_absent(path)
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise CacheBreach(f"{db}: cannot be opened ({exc})") from None
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.set_progress_handler(budget.spent, _PROGRESS_OPS)
    for pragma in ("query_only = ON", "trusted_schema = OFF", "cell_size_check = ON"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def explain(exc: sqlite3.Error, db: Path, budget: Budget) -> CacheBreach:
    """A SQLite failure in a cache, said in its terms (an interrupt is the time budget)."""
    if isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted":
        return CacheBreach(f"{db}: a query ran past {budget.seconds:g} s (interrupted)")
    if isinstance(exc, sqlite3.DataError):
        return CacheBreach(f"{db}: a value over {MAX_VALUE_BYTES} bytes ({exc})")
    return CacheBreach(f"{db}: cannot be read ({exc})")


@lru_cache(maxsize=1)
def reference_schema() -> frozenset[tuple[str, str, str]]:
    """This harnessctl's schema as SQLite records it: ``(type, name, sql)`` of every table
    and index its migrations create (a fresh in-memory store)."""
    from .migrate import _BOOTSTRAP, load_migrations

    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(_BOOTSTRAP)
        for migration in load_migrations():
            for statement in migration.statements:
                conn.execute(statement)
        return schema_of(conn)
    finally:
        conn.close()


def schema_of(conn: sqlite3.Connection) -> frozenset[tuple[str, str, str]]:
    """A database's schema objects, the planner's statistics (``ANALYZE``) left out."""
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master LIMIT 10000").fetchall()
    return frozenset(
        (str(kind), str(name), " ".join(str(sql or "").split()))
        for kind, name, sql in rows
        if not str(name).startswith("sqlite_stat")
    )


def read_regular(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``: a regular file opened without following a final
    symlink or blocking on a FIFO; a file over ``limit`` is a breach."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise HarnessctlError(f"trajectory {path}: missing") from None
    except OSError as exc:  # ELOOP: a symlink
        raise CacheBreach(f"trajectory {path}: not a regular file ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CacheBreach(f"trajectory {path}: not a regular file")
        if info.st_size > limit:
            raise CacheBreach(f"trajectory {path}: over {limit} bytes")
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, _CHUNK))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise HarnessctlError(f"trajectory {path}: unreadable ({exc.strerror})") from None
    finally:
        os.close(fd)
    if left <= 0:  # it grew while read
        raise CacheBreach(f"trajectory {path}: over {limit} bytes")
    return b"".join(chunks)


def inflate(raw: bytes, where: str, *, keep: bool = True) -> bytes:
    """The JSON of a one-member gzip file, refused as it inflates once it passes
    :data:`MAX_TRAJECTORY_BYTES` or the value and container counts (a breach), or when it
    is not gzip (the row's error). ``keep=False`` only screens: it returns nothing and holds
    one chunk at a time."""
    inflater = zlib.decompressobj(wbits=31)  # gzip framing, one member
    out: list[bytes] = []
    size = values = containers = 0
    pending = raw
    try:
        while pending or not inflater.eof:
            chunk = inflater.decompress(pending, _CHUNK)
            pending = inflater.unconsumed_tail
            if not chunk and not pending:
                break
            size += len(chunk)
            containers += chunk.count(b"{") + chunk.count(b"[")
            values += chunk.count(b",")
            if size > MAX_TRAJECTORY_BYTES:
                raise CacheBreach(f"{where}: inflates past {MAX_TRAJECTORY_BYTES} bytes")
            if containers > MAX_TRAJECTORY_CONTAINERS:
                raise CacheBreach(f"{where}: over {MAX_TRAJECTORY_CONTAINERS} objects and arrays")
            if values + containers > MAX_TRAJECTORY_VALUES:
                raise CacheBreach(f"{where}: over {MAX_TRAJECTORY_VALUES} JSON values")
            if keep:
                out.append(chunk)
    except zlib.error as exc:
        raise HarnessctlError(f"{where}: not gzip ({exc})") from None
    if not inflater.eof or inflater.unused_data:
        raise HarnessctlError(f"{where}: not one complete gzip member")
    return b"".join(out)
