"""Read-through rollout caches: another store, opened read-only, that serves matching rollouts.

A store pointed at caches (``cache_from:`` in harnessctl.yaml, ``HARNESSCTL_CACHE_FROM``)
looks a cache key up in its own rows first, then in each cache in order. A rollout found in
a cache is copied into the store, with its model calls and its trajectory file, and its
``origin`` names the cache it came from; from then on it is the store's own row, so every
command (show, profile, report, export-pool) reads it as if it had run here.

A cache is data from outside, never trusted: it is opened read-only and never migrated, its
schema must be this harnessctl's, and each row, call and trajectory is validated as the
store's own are (the row's fields and outcome, a trajectory that loads as a ``Trajectory``
of the same rollout, bounded file sizes) before anything is copied; the copy's paths are
made here from the row's id, never taken from the cache. A row that fails is skipped with a
warning and the rollout runs as if the cache did not have it. What validation cannot tell is
whether the cache's producer ran the same code honestly: point only at caches you trust.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col, select

from harnessctl.constants import STATE_DIR
from harnessctl.errors import ConfigError, HarnessctlError

from .migrate import MIGRATIONS_TABLE, load_migrations
from .models import ModelCallRow, RolloutRow

_log = logging.getLogger(__name__)

MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024
"""A cached trajectory larger than this, compressed or not, is not copied (the gateway keeps
at most ``bounds.MAX_RECORD_BYTES`` of one rollout's records)."""
_ID = re.compile(r"^[0-9a-f]{32}$")
_KEY = re.compile(r"^[0-9a-f]{64}$")
_IN_CHUNK = 500


def parse_sources(value: str | Iterable[str] | None, base: Path) -> list[Path]:
    """Cache directories from config or the environment variable (``os.pathsep``-separated),
    relative ones resolved against ``base``."""
    if value is None:
        return []
    items = value.split(os.pathsep) if isinstance(value, str) else list(value)
    return [(base / item).resolve() for item in (i.strip() for i in items) if item]


class CacheSource:
    """One read-only cache: a workspace (its ``.harnessctl/``) or a store directory holding
    ``store.db`` and ``trajectories/``."""

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
        self._engine: Engine = create_engine(
            f"sqlite:///file:{self.db}?mode=ro&uri=true",
            connect_args={"check_same_thread": False},
        )
        self._check_schema()

    def _check_schema(self) -> None:
        ours = max(m.number for m in load_migrations())
        try:
            with self._engine.connect() as conn:
                theirs = conn.execute(text(f"SELECT MAX(number) FROM {MIGRATIONS_TABLE}")).scalar()
        except SQLAlchemyError as exc:
            self._engine.dispose()
            raise ConfigError("cache_from", f"{self.db}: cannot be read ({exc})") from None
        if theirs != ours:
            self._engine.dispose()
            raise ConfigError(
                "cache_from",
                f"{self.db}: store schema {theirs}, this harnessctl's is {ours}; a cache is "
                "read as it is, never migrated: open it once with this harnessctl version",
            )

    def close(self) -> None:
        self._engine.dispose()

    def lookup(self, keys: list[str]) -> list[tuple[RolloutRow, list[ModelCallRow], dict]]:
        """The cache's valid rollouts under ``keys``, each with its calls and trajectory."""
        found = []
        with Session(self._engine) as session:
            for start in range(0, len(keys), _IN_CHUNK):
                chunk = keys[start : start + _IN_CHUNK]
                query = select(RolloutRow).where(col(RolloutRow.cache_key).in_(chunk))
                for raw in session.exec(query):
                    try:
                        row = self._valid_row(raw, set(chunk))
                        calls = self._valid_calls(session, row)
                        trajectory = self._valid_trajectory(raw, row)
                    except HarnessctlError as exc:
                        _log.warning("rollout cache %s: skipped a row: %s", self.origin, exc)
                        continue
                    found.append((row, calls, trajectory))
        return found

    def _valid_row(self, raw: RolloutRow, wanted: set[str]) -> RolloutRow:
        from pydantic import ValidationError

        from ..outcomes import ALL_OUTCOMES, Outcome

        data = raw.model_dump(warnings=False)  # a malformed field is reported below, once
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

    def _valid_calls(self, session: Session, row: RolloutRow) -> list[ModelCallRow]:
        from pydantic import ValidationError

        query = select(ModelCallRow).where(ModelCallRow.rollout_id == row.id)
        calls = []
        for raw in session.exec(query.order_by(col(ModelCallRow.idx))):
            try:
                call = ModelCallRow.model_validate(raw.model_dump(warnings=False))
            except ValidationError as exc:
                msg = exc.errors()[0]["msg"]
                raise HarnessctlError(f"call of rollout {row.id}: {msg}") from None
            call.attempt_id = call.edit_id = None  # what the store sets, never the cache's
            calls.append(call)
        return calls

    def _valid_trajectory(self, raw: RolloutRow, row: RolloutRow) -> dict[str, Any]:
        from pydantic import ValidationError

        from ..records import Trajectory
        from .models import trajectory_relpath

        path = self.trajectory_dir / trajectory_relpath(row.id)  # never the row's own path
        try:
            if path.stat().st_size > MAX_TRAJECTORY_BYTES:
                raise HarnessctlError(f"trajectory {path}: over {MAX_TRAJECTORY_BYTES} bytes")
            with gzip.open(path, "rb") as gz:
                blob = gz.read(MAX_TRAJECTORY_BYTES + 1)
        except (OSError, EOFError) as exc:
            raise HarnessctlError(f"trajectory {path}: unreadable ({exc})") from None
        if len(blob) > MAX_TRAJECTORY_BYTES:
            raise HarnessctlError(f"trajectory {path}: over {MAX_TRAJECTORY_BYTES} bytes")
        try:
            data = json.loads(blob.decode("utf-8"))
            loaded = Trajectory.load(data, where=f"trajectory {path}")
        except (ValueError, ValidationError, HarnessctlError) as exc:
            raise HarnessctlError(f"trajectory {path}: not a trajectory ({exc})") from None
        if loaded.rollout_id != row.id or loaded.task_id != row.task_id:
            raise HarnessctlError(f"trajectory {path}: belongs to another rollout")
        if loaded.seed != row.seed or loaded.outcome != row.outcome:
            raise HarnessctlError(f"trajectory {path}: its seed or outcome is not the row's")
        return data
