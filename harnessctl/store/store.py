"""The Store: rollouts, runs, harnesses and model calls in a database; trajectories in files.

One engine per store, one short session per call, so a Store may be shared by threads.
Every returned row is detached from its session and stays readable after the call.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, func, text
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlmodel import Session, col, select

from harnessctl.constants import ENV_CACHE_FROM, ENV_STORE_URL, STATE_DIR
from harnessctl.errors import HarnessctlError
from harnessctl.gateway.protocol import redact

from .calls import ENV_PREFIX, POLICY, CallTotals, HostCall
from .engine import create_store_engine, writer
from .migrate import migrate
from .models import (
    RUN_STATUSES,
    AttemptRow,
    EditRow,
    HarnessRow,
    ModelCallRow,
    ProfileRow,
    RolloutClaimRow,
    RolloutRow,
    RunMemberRow,
    RunRow,
    new_id,
    trajectory_relpath,
)
from .readthrough import CacheSource, parse_sources
from .trajectories import read_trajectory, write_trajectory

MIN_PREFIX = 4
_log = logging.getLogger(__name__)
_IN_CHUNK = 500  # stays far below SQLite's bound-parameter limit


if TYPE_CHECKING:
    from ..records import Trajectory


class Store:
    """Access to one harnessctl store; opening it applies pending migrations."""

    def __init__(self, url: str, trajectory_dir: Path, cache_from: Iterable[Path] = ()) -> None:
        self.url = url
        self.trajectory_dir = Path(trajectory_dir)
        self.cache_from = list(cache_from)
        """Read-through caches (``store.readthrough``), opened on the first miss."""
        self._sources: list[CacheSource] | None = None
        self._sources_lock = threading.Lock()
        try:
            self._engine: Engine = create_store_engine(url)
        except SQLAlchemyError as exc:
            raise HarnessctlError(f"store {url}: cannot open ({exc})") from exc
        self._writer = writer(self._engine)
        try:
            migrate(self._engine)
        except SQLAlchemyError as exc:
            self._engine.dispose()
            where = self._engine.url.render_as_string(hide_password=True)
            raise HarnessctlError(
                f"store {where}: cannot open ({exc}){_recovery(self._engine, exc)}"
            ) from exc
        except BaseException:
            self._engine.dispose()
            raise

    @classmethod
    def for_workspace(cls, workspace: Path, url: str | None = None) -> Store:
        """The workspace's store: ``url``, else $HARNESSCTL_STORE_URL, else SQLite in it;
        read through the caches of $HARNESSCTL_CACHE_FROM."""
        state = Path(workspace) / STATE_DIR
        resolved = url or os.environ.get(ENV_STORE_URL) or f"sqlite:///{state / 'store.db'}"
        caches = parse_sources(os.environ.get(ENV_CACHE_FROM), Path(workspace))
        return cls(resolved, state / "trajectories", caches)

    def close(self) -> None:
        """Release every pooled connection."""
        self._engine.dispose()
        for source in self._sources or []:
            source.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _session(self, *, write: bool = False) -> Iterator[Session]:
        with Session(self._writer if write else self._engine, expire_on_commit=False) as session:
            yield session

    # --- harnesses and runs ---

    def upsert_harness(self, row: HarnessRow) -> None:
        """Insert a harness, or update name, path and manifest of the one with its hash."""
        for attempt in range(2):
            try:
                with self._session(write=True) as session:
                    existing = session.get(HarnessRow, row.hash)
                    if existing is None:
                        session.add(row)
                    else:
                        existing.name, existing.path = row.name, row.path
                        existing.manifest_json = row.manifest_json
                    session.commit()
                return
            except IntegrityError:
                if attempt:  # a concurrent insert won; the second pass updates it
                    raise

    def start_run(self, row: RunRow) -> RunRow:
        """Record a run as started by this process (host, pid, start time, heartbeat: what
        :meth:`mark_dead_runs` checks); return it."""
        from ..liveness import this_process

        if not row.host:
            row.host, row.pid, row.pid_started = this_process()
        row.heartbeat_at = time.time()
        with self._session(write=True) as session:
            session.add(row)
            session.commit()
        return row

    def heartbeat(self, run_id: str) -> None:
        """Refresh a working run's heartbeat (how another machine tells it is alive)."""
        with self._session(write=True) as session:
            row = session.get(RunRow, run_id)
            if row is not None and row.status == "running":
                row.heartbeat_at = time.time()
                session.commit()

    def mark_dead_runs(self) -> list[RunRow]:
        """Mark ``died`` every ``running`` run whose process is gone (by pid and start time
        on this machine, by heartbeat from another), release its claims; return them."""
        from ..liveness import alive

        now = time.time()
        with self._session() as session:
            running = list(session.exec(select(RunRow).where(RunRow.status == "running")))
        dead = [r for r in running if not alive(r.host, r.pid, r.pid_started, r.heartbeat_at, now)]
        for row in dead:
            with self._session(write=True) as session:
                current = session.get(RunRow, row.id)
                if current is None or current.status != "running":
                    continue
                current.status, current.finished_at = "died", now
                self._release(session, row.id)
                session.commit()
        return dead

    def claim_rollouts(self, keys: Iterable[str], run_id: str) -> set[str]:
        """Claim the rollouts ``keys`` for ``run_id``: those unclaimed, already its own, or
        claimed by a run that is no longer running (finished, died). Returns the claimed
        keys; the rest are being executed by a live run."""
        from ..liveness import alive

        wanted = list(dict.fromkeys(keys))
        for attempt in range(3):
            try:
                with self._session(write=True) as session:
                    claims: dict[str, RolloutClaimRow] = {}
                    for start in range(0, len(wanted), _IN_CHUNK):
                        chunk = wanted[start : start + _IN_CHUNK]
                        query = select(RolloutClaimRow).where(
                            col(RolloutClaimRow.cache_key).in_(chunk)
                        )
                        claims.update((c.cache_key, c) for c in session.exec(query))
                    owners = {c.run_id for c in claims.values()} - {run_id}
                    now = time.time()
                    live = {
                        r.id
                        for r in (session.get(RunRow, o) for o in owners)
                        if r is not None
                        and r.status == "running"
                        and alive(r.host, r.pid, r.pid_started, r.heartbeat_at, now)
                    }
                    mine: set[str] = set()
                    for key in wanted:
                        claim = claims.get(key)
                        if claim is None:
                            session.add(RolloutClaimRow(cache_key=key, run_id=run_id))
                        elif claim.run_id not in live:
                            claim.run_id, claim.claimed_at = run_id, now
                        else:
                            continue
                        mine.add(key)
                    session.commit()
                return mine
            except IntegrityError:  # a concurrent claimer inserted first: look again
                if attempt == 2:
                    raise
        return set()

    def claims(self, run_id: str | None = None) -> list[RolloutClaimRow]:
        """Rollout claims held now (of ``run_id`` only, when given)."""
        query = select(RolloutClaimRow)
        if run_id is not None:
            query = query.where(RolloutClaimRow.run_id == run_id)
        with self._session() as session:
            return list(session.exec(query))

    @staticmethod
    def _release(session: Session, run_id: str) -> None:
        for claim in session.exec(select(RolloutClaimRow).where(RolloutClaimRow.run_id == run_id)):
            session.delete(claim)

    def finish_run(
        self,
        run_id: str,
        status: str,
        summary: dict[str, Any] | None,
        members: Iterable[RolloutRow] = (),
    ) -> None:
        """Mark a run finished with ``status`` (done, failed, interrupted) and a summary, and
        record ``members``, the rollouts it asked for and got (its membership), in the same
        transaction."""
        if status not in RUN_STATUSES:
            raise HarnessctlError(f"run status {status!r} is not one of {', '.join(RUN_STATUSES)}")
        with self._session(write=True) as session:
            row = session.get(RunRow, run_id)
            if row is None:
                raise HarnessctlError(f"no run with id {run_id!r}")
            row.status = status
            row.finished_at = time.time()
            row.summary_json = None if summary is None else json.dumps(summary, sort_keys=True)
            row.membership = True
            seen: set[str] = set()
            for member in members:
                if member.id not in seen:
                    seen.add(member.id)
                    session.add(
                        RunMemberRow(
                            run_id=run_id,
                            rollout_id=member.id,
                            task_id=member.task_id,
                            seed=member.seed,
                        )
                    )
            self._release(session, run_id)
            session.commit()

    def members(self, run_id: str) -> list[RolloutRow]:
        """The rollouts recorded as the run's membership, in (task, seed) order
        (``RunRow.membership`` says whether it was recorded)."""
        query = (
            select(RolloutRow)
            .join(RunMemberRow, col(RunMemberRow.rollout_id) == col(RolloutRow.id))
            .where(RunMemberRow.run_id == run_id)
            .order_by(col(RunMemberRow.task_id), col(RunMemberRow.seed))
        )
        with self._session() as session:
            return list(session.exec(query))

    def run(self, run_id: str) -> RunRow:
        """The run with this exact id."""
        with self._session() as session:
            row = session.get(RunRow, run_id)
        if row is None:
            raise HarnessctlError(f"no run with id {run_id!r}")
        return row

    def harnesses(self) -> list[HarnessRow]:
        """Every harness version the store has seen."""
        with self._session() as session:
            return list(session.exec(select(HarnessRow)))

    def runs(self, *, limit: int | None = None) -> list[RunRow]:
        """Runs, newest first (at most ``limit``)."""
        query = select(RunRow).order_by(col(RunRow.started_at).desc(), col(RunRow.id))
        if limit is not None:
            query = query.limit(limit)
        with self._session() as session:
            return list(session.exec(query))

    # --- rollouts ---

    def get_by_cache_keys(self, keys: Iterable[str]) -> dict[str, RolloutRow]:
        """Rollouts recorded under any of ``keys``, by cache key: the store's own, then
        those its read-through caches hold (copied into the store as they are found)."""
        wanted = list(dict.fromkeys(keys))
        found = self._own_by_cache_keys(wanted)
        missing = [k for k in wanted if k not in found]
        for source in self._cache_sources() if missing else []:
            for row, calls, trajectory in source.lookup(missing):  # one at a time
                copied = self._copy_from_cache(row, calls, trajectory, source.origin)
                if copied is not None:
                    found[copied.cache_key] = copied
            missing = [k for k in missing if k not in found]
            if not missing:
                break
        return found

    def _own_by_cache_keys(self, wanted: list[str]) -> dict[str, RolloutRow]:
        found: dict[str, RolloutRow] = {}
        with self._session() as session:
            for start in range(0, len(wanted), _IN_CHUNK):
                chunk = wanted[start : start + _IN_CHUNK]
                query = select(RolloutRow).where(col(RolloutRow.cache_key).in_(chunk))
                found.update((row.cache_key, row) for row in session.exec(query))
        return found

    def _cache_sources(self) -> list[CacheSource]:
        with self._sources_lock:
            if self._sources is None:
                opened: list[CacheSource] = []
                try:
                    for path in self.cache_from:
                        opened.append(CacheSource(path))
                except BaseException:
                    for source in opened:
                        source.close()
                    raise
                self._sources = opened
            return self._sources

    def _copy_from_cache(
        self, row: RolloutRow, calls: list[ModelCallRow], trajectory: bytes, origin: str
    ) -> RolloutRow | None:
        """Record a cache's rollout here under its own id, ``origin`` naming the cache, its
        trajectory the checked JSON the cache held; None when that id is taken here by
        another rollout (the row is then not served)."""
        with self._session() as session:
            taken = session.get(RolloutRow, row.id)
        if taken is not None and taken.cache_key != row.cache_key:
            _log.warning("rollout cache %s: id %s is another rollout here", origin, row.id)
            return None
        row.origin, row.trajectory_path = origin, ""
        for call in calls:
            call.id = ""
        return self.record_rollout(row, calls, trajectory)

    def record_rollout(
        self,
        rollout: RolloutRow,
        calls: list[ModelCallRow],
        trajectory: dict[str, Any] | bytes,
    ) -> RolloutRow:
        """Record a rollout, its model calls and its trajectory; idempotent on cache_key.

        If a rollout with the same cache key exists (recorded earlier, or by a concurrent
        thread or process that won the race), that row is returned and nothing is written.
        """
        with self._session() as session:
            query = select(RolloutRow).where(
                (RolloutRow.cache_key == rollout.cache_key) | (RolloutRow.id == rollout.id)
            )
            clashes = session.exec(query).all()
        for row in clashes:
            if row.cache_key == rollout.cache_key:
                return row
        if clashes:  # same id, other key: writing the file would clobber its trajectory
            raise HarnessctlError(
                f"rollout id {rollout.id} is already recorded under cache key "
                f"{clashes[0].cache_key}, not {rollout.cache_key}"
            )
        rollout.trajectory_path = trajectory_relpath(rollout.id)
        path = self.trajectory_dir / rollout.trajectory_path
        write_trajectory(path, trajectory)  # before the row: a row never lacks its file
        for call in calls:  # the agent's calls are ``policy``; an episode's keep theirs
            call.purpose, call.rollout_id, call.attempt_id = _owned(call), rollout.id, None
            call.id = _call_id(rollout.id, call)
            call.run_id = call.run_id or rollout.run_id
        try:
            winner = self._insert_unless_recorded(rollout, calls)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        if winner is None:
            return rollout
        if winner.trajectory_path != rollout.trajectory_path:
            path.unlink(missing_ok=True)  # ours is an orphan now
        return winner

    def _insert_unless_recorded(
        self, rollout: RolloutRow, calls: list[ModelCallRow]
    ) -> RolloutRow | None:
        """Insert rollout and calls in one transaction; return the row that beat us to it."""
        query = select(RolloutRow).where(RolloutRow.cache_key == rollout.cache_key)
        try:
            with self._session(write=True) as session:
                winner = session.exec(query).first()
                if winner is None:
                    session.add(rollout)
                    session.flush()  # no ORM relationship orders the inserts for the FK
                    session.add_all(calls)
                    session.commit()
                return winner
        except IntegrityError:
            # Databases without SQLite's write lock let two writers race to the unique key.
            winner = self.get_by_cache_keys([rollout.cache_key]).get(rollout.cache_key)
            if winner is None:
                raise
            return winner

    def record_attempt(self, row: AttemptRow, calls: Iterable[ModelCallRow] = ()) -> None:
        """Record an infra-failed attempt that was retried, with the model calls it made
        before it failed (policy calls of the attempt: their cost was spent too)."""
        rows = list(calls)
        for call in rows:
            call.purpose, call.attempt_id, call.rollout_id = _owned(call), row.id, None
            call.id = _call_id(row.id, call)
            call.run_id = call.run_id or row.run_id or None
        with self._session(write=True) as session:
            session.add(row)
            session.flush()  # the calls' foreign key needs the attempt first
            session.add_all(rows)
            session.commit()

    def record_calls(
        self,
        calls: Iterable[HostCall],
        *,
        purpose: str,
        edit_id: str | None = None,
        run_id: str | None = None,
    ) -> list[ModelCallRow]:
        """Log model calls made on the host (an editor's, a voter's) under ``purpose``."""
        rows = [
            call_row(call, id=new_id(), idx=idx, purpose=purpose, edit_id=edit_id, run_id=run_id)
            for idx, call in enumerate(calls)
        ]
        if rows:
            with self._session(write=True) as session:
                session.add_all(rows)
                session.commit()
        return rows

    def attempts(
        self, *, cache_key: str | None = None, run_id: str | None = None
    ) -> list[AttemptRow]:
        """Recorded infra-failed attempts, oldest first, optionally filtered."""
        query = select(AttemptRow)
        if cache_key is not None:
            query = query.where(AttemptRow.cache_key == cache_key)
        if run_id is not None:
            query = query.where(AttemptRow.run_id == run_id)
        with self._session() as session:
            return list(
                session.exec(query.order_by(col(AttemptRow.created_at), col(AttemptRow.id)))
            )

    def rollout(self, id_or_prefix: str) -> RolloutRow:
        """The rollout with this id, or the only one whose id starts with this prefix."""
        prefix = id_or_prefix.strip()
        if len(prefix) < MIN_PREFIX:
            raise HarnessctlError(
                f"rollout id {prefix!r} is too short: give at least {MIN_PREFIX} characters"
            )
        with self._session() as session:
            exact = session.get(RolloutRow, prefix)
            if exact is not None:
                return exact
            query = (
                select(RolloutRow)
                .where(col(RolloutRow.id).startswith(prefix, autoescape=True))
                .order_by(col(RolloutRow.id))
                .limit(6)
            )
            rows = list(session.exec(query))
        if not rows:
            raise HarnessctlError(f"no rollout with an id starting with {prefix!r}")
        if len(rows) > 1:
            shown = ", ".join(row.id for row in rows[:5]) + (", ..." if len(rows) > 5 else "")
            raise HarnessctlError(
                f"rollout id prefix {prefix!r} is ambiguous ({shown}): give more characters"
            )
        return rows[0]

    def trajectory_data(self, rollout: RolloutRow) -> dict[str, Any]:
        """The rollout's trajectory file as stored (plain JSON, not validated)."""
        if not rollout.trajectory_path:
            raise HarnessctlError(f"rollout {rollout.id} has no trajectory file")
        return read_trajectory(self.trajectory_dir / rollout.trajectory_path)

    def trajectory(self, rollout: RolloutRow) -> Trajectory:
        """The rollout's trajectory, read from its file and validated (older formats are
        upgraded; a corrupt or newer-format file raises HarnessctlError naming it)."""
        from pydantic import ValidationError

        from ..records import Trajectory

        data = self.trajectory_data(rollout)
        path = self.trajectory_dir / rollout.trajectory_path
        try:
            return Trajectory.load(data, where=f"trajectory file {path}")
        except ValidationError as exc:
            raise HarnessctlError(f"trajectory file {path}: not a trajectory ({exc})") from exc

    def calls(
        self,
        rollout_id: str | None = None,
        *,
        attempt_id: str | None = None,
        edit_id: str | None = None,
        run_id: str | None = None,
        purpose: str | None = None,
    ) -> list[ModelCallRow]:
        """Logged model calls matching every given filter: one rollout's in call order, else
        oldest first."""
        query = _call_filters(
            select(ModelCallRow), rollout_id, attempt_id, edit_id, run_id, purpose
        )
        order: list[Any] = [col(ModelCallRow.idx), col(ModelCallRow.id)]
        if rollout_id is None and attempt_id is None:
            order.insert(0, col(ModelCallRow.created_at))
        with self._session() as session:
            return list(session.exec(query.order_by(*order)))

    def call_totals(
        self,
        *,
        rollout_id: str | None = None,
        attempt_id: str | None = None,
        edit_id: str | None = None,
        run_id: str | None = None,
        purpose: str | None = None,
    ) -> dict[str, CallTotals]:
        """Calls, tokens and cost of the call log by purpose (policy, editor, voter), over
        the calls matching every given filter; purposes without calls are left out."""
        purpose_col = col(ModelCallRow.purpose)
        query = sa_select(
            purpose_col,
            func.count(),
            func.coalesce(func.sum(col(ModelCallRow.prompt_tokens)), 0),
            func.coalesce(func.sum(col(ModelCallRow.completion_tokens)), 0),
            func.coalesce(func.sum(col(ModelCallRow.cost_usd)), 0.0),
        )
        query = _call_filters(query, rollout_id, attempt_id, edit_id, run_id, purpose)
        query = query.group_by(purpose_col).order_by(purpose_col)
        with self._session() as session:
            return {
                str(p): CallTotals(int(n), int(pt), int(ct), float(cost))
                for p, n, pt, ct, cost in session.connection().execute(query)
            }

    def rollouts(
        self,
        *,
        harness_hash: str | None = None,
        task_id: str | None = None,
        policy_id: str | None = None,
        run_id: str | None = None,
        suite: str | None = None,
        split: str | None = None,
    ) -> list[RolloutRow]:
        """Rollouts matching every given filter, oldest first."""
        filters = {
            "harness_hash": harness_hash,
            "task_id": task_id,
            "policy_id": policy_id,
            "run_id": run_id,
            "suite": suite,
            "split": split,
        }
        query = select(RolloutRow)
        for name, value in filters.items():
            if value is not None:
                query = query.where(getattr(RolloutRow, name) == value)
        query = query.order_by(col(RolloutRow.created_at), col(RolloutRow.id))
        with self._session() as session:
            return list(session.exec(query))

    # --- edits ---

    def edit_by_key(self, edit_key: str) -> EditRow | None:
        """The edit recorded under this deterministic key, if any (resume)."""
        with self._session() as session:
            return session.exec(select(EditRow).where(EditRow.edit_key == edit_key)).first()

    def record_edit(self, row: EditRow) -> EditRow:
        """Insert or replace the edit with ``row.edit_key`` (its status moves forward)."""
        with self._session(write=True) as session:
            _queue_writers(session, f"edit:{row.edit_key}")
            existing = session.exec(select(EditRow).where(EditRow.edit_key == row.edit_key)).first()
            if existing is not None:
                row.id = existing.id
                session.merge(row)
            else:
                session.add(row)
            session.commit()
        return row

    def edits(
        self,
        *,
        evolve_id: str | None = None,
        direction: str | None = None,
        parent_hash: str | None = None,
    ) -> list[EditRow]:
        """Recorded edits, oldest first, optionally filtered."""
        query = select(EditRow)
        if evolve_id is not None:
            query = query.where(EditRow.evolve_id == evolve_id)
        if direction is not None:
            query = query.where(EditRow.direction == direction)
        if parent_hash is not None:
            query = query.where(EditRow.parent_hash == parent_hash)
        with self._session() as session:
            return list(session.exec(query.order_by(col(EditRow.created_at), col(EditRow.id))))

    # --- profiles ---

    def record_profile(self, row: ProfileRow) -> ProfileRow:
        """Insert a profile as the current one of its key; earlier ones stay, not current."""
        query = select(ProfileRow).where(
            col(ProfileRow.harness_hash) == row.harness_hash,
            col(ProfileRow.policy_id) == row.policy_id,
            col(ProfileRow.suite) == row.suite,
            col(ProfileRow.split) == row.split,
            col(ProfileRow.current),
        )
        key = f"profile:{row.harness_hash}|{row.policy_id}|{row.suite}|{row.split}"
        with self._session(write=True) as session:
            _queue_writers(session, key)
            for old in session.exec(query):
                old.current = False
                session.add(old)
            row.current = True
            session.add(row)
            session.commit()
        return row

    def profiles(
        self,
        *,
        harness_hash: str | None = None,
        harness_name: str | None = None,
        policy_id: str | None = None,
        suite: str | None = None,
        split: str | None = None,
        current: bool | None = True,
    ) -> list[ProfileRow]:
        """Profiles matching every given filter, oldest first (``current=None``: history too)."""
        filters = {
            "harness_hash": harness_hash,
            "harness_name": harness_name,
            "policy_id": policy_id,
            "suite": suite,
            "split": split,
            "current": current,
        }
        query = select(ProfileRow)
        for name, value in filters.items():
            if value is not None:
                query = query.where(getattr(ProfileRow, name) == value)
        query = query.order_by(col(ProfileRow.created_at), col(ProfileRow.id))
        with self._session() as session:
            return list(session.exec(query))


def _recovery(engine: Engine, exc: SQLAlchemyError) -> str:
    """How to recover a SQLite store file that is damaged or not a store (nothing is changed
    by harnessctl), or '' for any other error."""
    text = str(exc).lower()
    if engine.url.get_backend_name() != "sqlite" or not any(
        s in text for s in ("not a database", "malformed", "disk image")
    ):
        return ""
    path = engine.url.database or "STORE.db"
    return (
        f". The file is damaged or not a harnessctl store; harnessctl has not changed it. To "
        f"keep what it holds: `sqlite3 {path} .recover | sqlite3 recovered.db`, then "
        f"`--store sqlite:///recovered.db` (or move it in place of the old file). To start "
        f"afresh: move {path} aside; the harnesses and their git history live in the "
        f"workspace, not the store, and rollouts are run again as they are needed."
    )


def _call_filters(query: Any, *values: str | None) -> Any:
    """``query`` restricted to calls whose owner columns equal the given values."""
    columns = ("rollout_id", "attempt_id", "edit_id", "run_id", "purpose")
    for name, value in zip(columns, values, strict=True):
        if value is not None:
            query = query.where(getattr(ModelCallRow, name) == value)
    return query


def _queue_writers(session: Session, key: str) -> None:
    """Make read-then-write transactions on the same logical ``key`` run one at a time.

    On PostgreSQL, a transaction-scoped advisory lock on a hash of the key (two writers
    would otherwise both see "no row yet" and both insert); SQLite's write transactions
    (BEGIN IMMEDIATE) are serialised already.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.connection().execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": key}
        )


def _owned(call: ModelCallRow) -> str:
    """The purpose of a rollout's (or attempt's) call: ``policy`` (the agent's), or the
    ``env:<purpose>`` of a call the environment's episode made."""
    return call.purpose if call.purpose.startswith(ENV_PREFIX) else POLICY


def _call_id(owner_id: str, call: ModelCallRow) -> str:
    if call.purpose == POLICY:
        return f"{owner_id}:{call.idx}"
    return f"{owner_id}:{call.purpose}:{call.idx}"


def call_row(call: Any, **fields: Any) -> ModelCallRow:
    """A call-log row from a model call (the gateway's ``CallRecord`` or a ``HostCall``), its
    parameters redacted; ``fields`` set the owner (id, idx, purpose, rollout, edit, run)."""
    tool_calls = getattr(call, "tool_calls", None)
    return ModelCallRow(
        model=call.model,
        status=call.status,
        prompt_tokens=call.prompt_tokens,
        completion_tokens=call.completion_tokens,
        cost_usd=call.cost_usd,
        latency_s=call.latency_s,
        attempts=call.attempts,
        error=call.error,
        reply=call.reply,
        params_json=json.dumps(redact(call.params), sort_keys=True, default=str),
        tool_calls_json=json.dumps(tool_calls) if tool_calls else None,
        created_at=call.started_at,
        **fields,
    )
