"""Read-through rollout caches: another store, opened read-only, that serves matching rollouts.

A store pointed at caches (``cache_from:`` in harnessctl.yaml, ``HARNESSCTL_CACHE_FROM``)
looks a cache key up in its own rows first, then in each cache in order. A rollout found in
a cache is copied into the store, with its model calls and its trajectory file, and its
``origin`` names the cache it came from; from then on it is the store's own row, so every
command (show, profile, report, export-pool) reads it as if it had run here.

A cache is data from outside, never trusted. It is opened read-only and never migrated; a
cache of another schema version is a configuration error. Then two kinds of fault:

- a **breach** of what this harnessctl ever writes (``store.cachebounds``: a schema object
  that is not exactly ours, such as an endless recursive view; a FIFO, symlink or device
  where a file should be; a value, row, call list or trajectory over its bound, a gzip bomb
  or a JSON expansion included; SQL past its time budget; an unreadable database) skips the
  whole cache, with one warning naming it. Every lookup first screens all the rows it would
  copy against these bounds, so nothing of a cache found bad lands in the store;
- a **bad row** (a field's type, an unknown or infrastructure outcome, ``success`` against
  the outcome, a trajectory that is not gzip JSON of the same rollout, seed and outcome)
  skips that row with a warning; it runs as if the cache did not have it.

Rows are read and copied one at a time, so a lookup holds one rollout's bounded data, not the
batch's. The copy's paths are made here from the row's id, never taken from the cache. What
validation cannot tell is whether the cache's producer ran the same code honestly: point only
at caches you trust.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from harnessctl.bounds import MAX_JSON_DEPTH
from harnessctl.constants import STATE_DIR
from harnessctl.errors import ConfigError, HarnessctlError

from . import cachebounds as bounds
from .cachebounds import Budget, CacheBreach
from .migrate import MIGRATIONS_TABLE, load_migrations
from .models import ModelCallRow, RolloutRow, trajectory_relpath

_log = logging.getLogger(__name__)

MAX_TRAJECTORY_DEPTH = 2 * MAX_JSON_DEPTH
"""Nesting of a cached trajectory: harness-written JSON is kept at most ``MAX_JSON_DEPTH``
deep, inside a few levels of the trajectory's own (deeper would make every later reader of
the copy, ``show --json`` included, recurse as deep)."""
_ID = re.compile(r"^[0-9a-f]{32}$")
_KEY = re.compile(r"^[0-9a-f]{64}$")
_IN_CHUNK = 500
_ROLLOUT = tuple(RolloutRow.model_fields)
_CALL = tuple(ModelCallRow.model_fields)


def _columns(names: tuple[str, ...]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def _size(names: tuple[str, ...]) -> str:
    """SQL for the bytes of a row's values together (a blob or text read up to its bound)."""
    return " + ".join(f'coalesce(length(CAST("{n}" AS BLOB)), 0)' for n in names)


def parse_sources(value: str | Iterable[str] | None, base: Path) -> list[Path]:
    """Cache directories from config or the environment variable (``os.pathsep``-separated),
    relative ones resolved against ``base``."""
    if value is None:
        return []
    items = value.split(os.pathsep) if isinstance(value, str) else list(value)
    return [(base / item).resolve() for item in (i.strip() for i in items) if item]


class CachedRollout(NamedTuple):
    """One rollout a cache holds, checked: its row, its calls and its trajectory's JSON."""

    row: RolloutRow
    calls: list[ModelCallRow]
    trajectory: bytes


class CacheSource:
    """One read-only cache: a workspace (its ``.harnessctl/``) or a store directory holding
    ``store.db`` and ``trajectories/``. ``bad`` says why it is skipped, once it is."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        state = path / STATE_DIR if (path / STATE_DIR / "store.db").is_file() else path
        self.db, self.trajectory_dir = state / "store.db", state / "trajectories"
        if not self.db.is_file():
            raise ConfigError(
                "cache_from",
                f"{path}: not a rollout cache (no store.db in it or in its {STATE_DIR}/)",
            )
        self.origin = str(path)
        self.bad: str | None = None
        self._lock = threading.Lock()
        try:
            self._check_schema()
        except CacheBreach as exc:
            self._skip(exc)

    def _skip(self, exc: CacheBreach) -> None:
        with self._lock:
            if self.bad is not None:
                return
            self.bad = str(exc)
        _log.warning(
            "rollout cache %s: skipped, its rollouts run instead: %s", self.origin, self.bad
        )

    def _check_schema(self) -> None:
        """The cache's migrations must be ours (else a configuration error, as before: open it
        once with this version), and every schema object exactly ours (else a breach)."""
        ours = bounds.reference_schema()
        journal = next(o for o in ours if o[1] == MIGRATIONS_TABLE)
        budget = Budget()
        conn = bounds.connect(self.db, budget)
        try:
            with budget.running():
                theirs = bounds.schema_of(conn)
                if journal not in theirs:  # read nothing through a view or a stranger table
                    raise CacheBreach(f"{self.db}: {MIGRATIONS_TABLE} is not this harnessctl's")
                number = conn.execute(f"SELECT MAX(number) FROM {MIGRATIONS_TABLE}").fetchone()[0]
        except sqlite3.Error as exc:
            raise bounds.explain(exc, self.db, budget) from None
        finally:
            conn.close()
        expected = max(m.number for m in load_migrations())
        if number != expected:
            raise ConfigError(
                "cache_from",
                f"{self.db}: store schema {number}, this harnessctl's is {expected}; a cache is "
                "read as it is, never migrated: open it once with this harnessctl version",
            )
        if theirs != ours:  # name a stranger first (a view, a trigger), then what differs
            strangers = sorted(theirs - ours, key=lambda o: (o[0] == "table", o[0] == "index", o))
            kind, name, _ = (strangers or sorted(ours - theirs))[0]
            said = "is not ours" if strangers else "is missing or differs"
            raise CacheBreach(
                f"{self.db}: its schema is not this harnessctl's (the {kind} {name[:60]!r} {said})"
            )

    def close(self) -> None:
        """Nothing is held between lookups (each opens and closes its own connection)."""

    def lookup(self, keys: list[str]) -> Iterator[CachedRollout]:
        """The cache's valid rollouts under ``keys``, one at a time. Each chunk of keys is
        first screened against every bound; a breach skips the cache before anything of it
        is returned."""
        if self.bad is not None:
            return
        budget = Budget()
        try:
            conn = bounds.connect(self.db, budget)
        except CacheBreach as exc:
            self._skip(exc)
            return
        try:
            for start in range(0, len(keys), _IN_CHUNK):
                wanted = set(keys[start : start + _IN_CHUNK])
                try:
                    ids = self._screen(conn, budget, sorted(wanted))
                except CacheBreach as exc:
                    self._skip(exc)
                    return
                for rollout_id in ids:
                    try:
                        found = self._read(conn, budget, rollout_id, wanted)
                    except CacheBreach as exc:  # it changed since the screen
                        self._skip(exc)
                        return
                    except HarnessctlError as exc:
                        self._skip_row(exc)
                        continue
                    yield found
        finally:
            conn.close()

    def _skip_row(self, exc: HarnessctlError) -> None:
        _log.warning("rollout cache %s: skipped a row: %s", self.origin, exc)

    def _query(self, conn: sqlite3.Connection, budget: Budget, sql: str, args=()) -> list:
        try:
            with budget.running():
                return conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise bounds.explain(exc, self.db, budget) from None

    def _path(self, rollout_id: str) -> Path:
        return self.trajectory_dir / trajectory_relpath(rollout_id)  # never the row's own

    def _screen(self, conn: sqlite3.Connection, budget: Budget, keys: list[str]) -> list[str]:
        """The ids of the rows under ``keys`` whose row, calls and trajectory are within
        bounds, read as sizes and counts only (a breach raises; a bad row is left out)."""
        marks = ", ".join("?" * len(keys))
        rows = self._query(
            conn,
            budget,
            f"SELECT substr(id, 1, 40), cache_key, {_size(_ROLLOUT)} FROM rollout "
            f"WHERE cache_key IN ({marks}) LIMIT {len(keys) + 1}",
            keys,
        )
        if len(rows) > len({key for _, key, _ in rows}):
            raise CacheBreach(f"{self.db}: several rollouts under one cache key")
        ids = []
        for rollout_id, _, size in rows:
            if size > bounds.MAX_ROW_BYTES:
                raise CacheBreach(f"{self.db}: a rollout row over {bounds.MAX_ROW_BYTES} bytes")
            if not isinstance(rollout_id, str) or not _ID.match(rollout_id):
                self._skip_row(HarnessctlError(f"rollout {str(rollout_id)!r}: malformed id"))
                continue
            self._screen_calls(conn, budget, rollout_id)
            path = self._path(rollout_id)
            try:
                raw = bounds.read_regular(path, bounds.MAX_TRAJECTORY_BYTES)
                bounds.inflate(raw, f"trajectory {path}", keep=False)
            except CacheBreach:
                raise
            except HarnessctlError as exc:  # missing, not gzip: that row's fault
                self._skip_row(exc)
                continue
            ids.append(rollout_id)
        return ids

    def _screen_calls(self, conn: sqlite3.Connection, budget: Budget, rollout_id: str) -> None:
        (count, size), *_ = self._query(
            conn,
            budget,
            f"SELECT count(*), coalesce(sum(size), 0) FROM (SELECT {_size(_CALL)} AS size "
            f"FROM model_call WHERE rollout_id = ? LIMIT {bounds.MAX_CALLS + 1})",
            (rollout_id,),
        )
        if count > bounds.MAX_CALLS or size > bounds.MAX_CALL_BYTES:
            raise CacheBreach(
                f"{self.db}: rollout {rollout_id} has over {bounds.MAX_CALLS} model calls or "
                f"{bounds.MAX_CALL_BYTES} bytes of them"
            )

    def _read(
        self, conn: sqlite3.Connection, budget: Budget, rollout_id: str, wanted: set[str]
    ) -> CachedRollout:
        """One screened rollout, read in full and validated (bounds checked again: the cache
        may have changed since the screen)."""
        found = self._query(
            conn, budget, f"SELECT {_columns(_ROLLOUT)} FROM rollout WHERE id = ?", (rollout_id,)
        )
        if len(found) != 1:
            raise HarnessctlError(f"rollout {rollout_id}: gone from the cache")
        values = dict(zip(_ROLLOUT, found[0], strict=True))
        if _bytes(values.values()) > bounds.MAX_ROW_BYTES:
            raise CacheBreach(f"{self.db}: a rollout row over {bounds.MAX_ROW_BYTES} bytes")
        row = self._valid_row(values, wanted)
        calls = self._query(
            conn,
            budget,
            f"SELECT {_columns(_CALL)} FROM model_call WHERE rollout_id = ? "
            f"ORDER BY idx LIMIT {bounds.MAX_CALLS + 1}",
            (rollout_id,),
        )
        if len(calls) > bounds.MAX_CALLS or _bytes(v for c in calls for v in c) > (
            bounds.MAX_CALL_BYTES
        ):
            raise CacheBreach(f"{self.db}: rollout {rollout_id}'s model calls over their bound")
        checked = [self._valid_call(dict(zip(_CALL, c, strict=True)), row) for c in calls]
        return CachedRollout(row, checked, self._valid_trajectory(row))

    def _valid_row(self, data: dict[str, Any], wanted: set[str]) -> RolloutRow:
        from pydantic import ValidationError

        from ..outcomes import ALL_OUTCOMES, Outcome

        where = f"rollout {str(data.get('id'))[:40]!r}"
        try:
            row = RolloutRow.model_validate(data)
        except ValidationError as exc:
            raise HarnessctlError(f"{where}: {exc.errors()[0]['msg']}") from None
        if not _ID.match(row.id) or not _KEY.match(row.cache_key) or row.cache_key not in wanted:
            raise HarnessctlError(f"{where}: malformed id or cache key")
        if row.outcome not in ALL_OUTCOMES or row.outcome == Outcome.INFRA_ERROR:
            raise HarnessctlError(f"{where}: outcome {row.outcome[:40]!r} is not a result")
        if row.success != (row.outcome == "success"):
            raise HarnessctlError(f"{where}: success does not match outcome {row.outcome}")
        numbers = (row.reward, row.cost_usd, row.latency_s, row.wall_s)
        counts = (row.steps, row.model_calls, row.prompt_tokens, row.completion_tokens)
        if not all(math.isfinite(x) for x in numbers) or min(*numbers, *counts) < 0:
            raise HarnessctlError(f"{where}: a negative or non-finite number")
        return row

    def _valid_call(self, data: dict[str, Any], row: RolloutRow) -> ModelCallRow:
        from pydantic import ValidationError

        try:
            call = ModelCallRow.model_validate(data)
        except ValidationError as exc:
            msg = exc.errors()[0]["msg"]
            raise HarnessctlError(f"call of rollout {row.id}: {msg}") from None
        call.attempt_id = call.edit_id = None  # what the store sets, never the cache's
        return call

    def _valid_trajectory(self, row: RolloutRow) -> bytes:
        """The trajectory's JSON, once it loads as this row's ``Trajectory`` (the parsed
        objects are dropped: the store keeps these bytes)."""
        from pydantic import ValidationError

        from ..records import Trajectory

        path = self._path(row.id)
        where = f"trajectory {path}"
        payload = bounds.inflate(bounds.read_regular(path, bounds.MAX_TRAJECTORY_BYTES), where)
        try:
            data = json.loads(payload)
            if _too_deep(data, MAX_TRAJECTORY_DEPTH):
                raise ValueError(f"nested deeper than {MAX_TRAJECTORY_DEPTH} levels")
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            loaded = Trajectory.load(data, where=where)
        except RecursionError:
            raise HarnessctlError(f"{where}: nested deeper than {MAX_TRAJECTORY_DEPTH}") from None
        except (ValueError, ValidationError, HarnessctlError) as exc:
            raise HarnessctlError(f"{where}: not a trajectory ({exc})") from None
        if loaded.rollout_id != row.id or loaded.task_id != row.task_id:
            raise HarnessctlError(f"{where}: belongs to another rollout")
        if loaded.seed != row.seed or loaded.outcome != row.outcome:
            raise HarnessctlError(f"{where}: its seed or outcome is not the row's")
        return payload


def _too_deep(value: Any, limit: int) -> bool:
    """Whether parsed JSON nests deeper than ``limit``: iterative, and only containers are
    kept to visit (``bounds.too_deep`` keeps every value: 100 MB more for a million
    strings, the most a cached trajectory may hold)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
    return False


def _bytes(values: Iterable[Any]) -> int:
    """What ``values`` (a row's, as SQLite returned them) weigh, strings and blobs by length."""
    return sum(len(v) if isinstance(v, str | bytes) else 8 for v in values)
