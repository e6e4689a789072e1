"""The store on every supported database: SQLite files and, when configured, PostgreSQL.

Each test gets a fresh database: a new SQLite file, or a new PostgreSQL database created on
the server named by $HARNESSCTL_TEST_PG_URL (whose role needs CREATEDB) and dropped after.
The PostgreSQL variants are skipped with a reason when that variable is unset, and fail
instead when $CI is set, so CI cannot silently stop testing PostgreSQL. `.ci/run` starts a
server and sets the variable; docs/store.md says how to do the same by hand.

The variables are read at import time: the autouse fixture in conftest.py clears every
HARNESSCTL_* variable before each test.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import column as sa_column
from sqlalchemy import create_engine, inspect, text
from sqlalchemy import table as sa_table
from sqlalchemy.engine import make_url
from sqlalchemy.pool import QueuePool
from sqlalchemy.types import TypeDecorator, TypeEngine

from harnessctl.errors import HarnessctlError
from harnessctl.store import (
    AttemptRow,
    HarnessRow,
    HostCall,
    ModelCallRow,
    RolloutRow,
    RunRow,
    Store,
)
from harnessctl.store import engine as engine_module
from harnessctl.store.engine import create_store_engine
from harnessctl.store.migrate import (
    MIGRATIONS_TABLE,
    PG_MIGRATION_LOCK,
    load_migrations,
    migrate,
)
from harnessctl.store.models import TABLE_MODELS
from tests.helpers import ROOT
from tests.helpers.ci import unavailable
from tests.helpers.stores import make_edit, make_profile, make_rollout, trajectory_files

REPO = ROOT
PG_URL_VAR = "HARNESSCTL_TEST_PG_URL"
PG_URL = os.environ.get(PG_URL_VAR, "").strip()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL naming a fresh, empty database of each kind."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'db' / 'store.db'}"
        return
    if not PG_URL:
        unavailable(
            "the PostgreSQL store tests",
            f"{PG_URL_VAR} is not set (e.g. postgresql+psycopg://hx:hx@127.0.0.1/hx)",
        )
    with fresh_pg_database() as url:
        yield url


class fresh_pg_database:  # noqa: N801  (used like a function)
    """Create a uniquely named database next to $HARNESSCTL_TEST_PG_URL's; drop it on exit."""

    def __init__(self) -> None:
        self.name = f"hx_t_{uuid.uuid4().hex[:16]}"
        self.admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT", poolclass=QueuePool)

    def __enter__(self) -> str:
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{self.name}"')
        url = make_url(PG_URL).set(database=self.name)
        return url.render_as_string(hide_password=False)

    def __exit__(self, *_exc: object) -> None:
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        self.admin.dispose()


@pytest.fixture
def store(backend: str, tmp_path: Path) -> Iterator[Store]:
    with Store.for_workspace(tmp_path, url=backend) as opened:
        yield opened


def rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` read over a connection of its own (what another process would see)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(text(sql))]
    finally:
        engine.dispose()


def python_type(sql_type: TypeEngine) -> type:
    # sqlmodel's AutoString is a TypeDecorator whose own python_type is ``object``.
    if isinstance(sql_type, TypeDecorator):
        sql_type = sql_type.impl_instance
    return sql_type.python_type


# --- engine ---


def test_server_urls_get_a_pre_pinged_connection_pool() -> None:
    # Creating an engine does not connect, so no server is needed here.
    engine = create_store_engine("postgresql+psycopg://u:p@127.0.0.1:1/none")
    try:
        assert isinstance(engine.pool, QueuePool)
        assert engine.pool.size() == engine_module.POOL_SIZE
        assert engine.pool._max_overflow == engine_module.MAX_OVERFLOW
        assert engine.pool._pre_ping is True
        assert engine.pool._recycle == engine_module.POOL_RECYCLE_S
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)  # SQLite has no server
def test_pool_replaces_connections_the_server_dropped(store: Store, backend: str) -> None:
    store.record_rollout(make_rollout("k1"), [], {})
    database = make_url(backend).database
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        killed = conn.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = :db AND pid <> pg_backend_pid()"
            ),
            {"db": database},
        ).scalar()
    admin.dispose()
    assert killed and killed >= 1  # the store's pooled connection
    assert [r.cache_key for r in store.rollouts()] == ["k1"]
    assert store.record_rollout(make_rollout("k2"), [], {}).cache_key == "k2"


# --- migrations ---


def test_migrations_applied_once_and_reopen_is_noop(backend: str, tmp_path: Path) -> None:
    Store.for_workspace(tmp_path, url=backend).close()
    query = f"SELECT number, name, applied_at FROM {MIGRATIONS_TABLE} ORDER BY number"
    first = rows(backend, query)
    assert [(n, name) for n, name, _ in first] == [
        (1, "initial"),
        (2, "edits"),
        (3, "profiles"),
        (4, "call_log"),
        (5, "tool_calls"),
        (6, "run_liveness"),
        (7, "rollout_origin"),
        (8, "run_membership"),
    ]
    assert [n for n, _, _ in first] == [m.number for m in load_migrations()]
    Store.for_workspace(tmp_path, url=backend).close()
    assert rows(backend, query) == first
    engine = create_store_engine(backend)
    try:
        assert migrate(engine) == []
    finally:
        engine.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)  # SQLite: BEGIN IMMEDIATE
def test_postgres_migrators_queue_on_an_advisory_lock(backend: str) -> None:
    holder = create_engine(backend)
    engine = create_store_engine(backend)
    applied: list[int] = []
    try:
        with holder.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": PG_MIGRATION_LOCK})
            thread = threading.Thread(target=lambda: applied.extend(migrate(engine)))
            thread.start()
            thread.join(timeout=1.0)
            assert thread.is_alive() and applied == []  # waiting, not failing or racing
            assert not inspect(holder).has_table(MIGRATIONS_TABLE)
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PG_MIGRATION_LOCK})
            thread.join(timeout=30)
        assert not thread.is_alive() and applied == [m.number for m in load_migrations()]
    finally:
        engine.dispose()
        holder.dispose()


def write_migrations(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, sql in files.items():
        (folder / name).write_text(sql)
    return folder


def test_new_migrations_apply_in_order_and_only_once(backend: str, tmp_path: Path) -> None:
    folder = write_migrations(
        tmp_path / "m",
        {
            "0001_one.sql": "CREATE TABLE a (id TEXT NOT NULL);\n",
            "0002_two.sql": "ALTER TABLE a ADD COLUMN x INTEGER;\nCREATE TABLE b (id TEXT);",
        },
    )
    migrations = load_migrations(folder)
    engine = create_store_engine(backend)
    try:
        assert migrate(engine, migrations[:1]) == [1]
        assert migrate(engine, migrations) == [2]
        assert migrate(engine, migrations) == []
        assert {c["name"] for c in inspect(engine).get_columns("a")} == {"id", "x"}
        with pytest.raises(HarnessctlError, match=r"migrations \[2\].*upgrade"):
            migrate(engine, migrations[:1])
    finally:
        engine.dispose()


def test_failed_migration_rolls_back_entirely(backend: str, tmp_path: Path) -> None:
    folder = write_migrations(
        tmp_path / "m", {"0001_bad.sql": "CREATE TABLE good (id TEXT);\nCREATE TABLE broken (;\n"}
    )
    engine = create_store_engine(backend)
    try:
        with pytest.raises(HarnessctlError, match="migration 0001_bad failed"):
            migrate(engine, load_migrations(folder))
        assert not inspect(engine).has_table("good")
        with engine.connect() as conn:
            assert conn.execute(text(f"SELECT count(*) FROM {MIGRATIONS_TABLE}")).scalar() == 0
    finally:
        engine.dispose()


def test_call_log_migration_keeps_earlier_calls(backend: str, tmp_path: Path) -> None:
    engine = create_store_engine(backend)
    try:
        assert migrate(engine, load_migrations()[:3]) == [1, 2, 3]
        rollout = make_rollout("k1", id="r1", run_id="run-a")
        with engine.begin() as conn:
            values = rollout.model_dump(exclude={"origin"})  # the schema of migration 3
            old = sa_table("rollout", *(sa_column(name) for name in values))
            conn.execute(old.insert().values(**values))
            conn.execute(
                text(
                    "INSERT INTO model_call (id, rollout_id, idx, model, status, prompt_tokens, "
                    "completion_tokens, cost_usd, latency_s, attempts, error, reply, created_at) "
                    "VALUES ('r1:0', 'r1', 0, 'm', 'ok', 11, 3, 0.5, 0.1, 1, NULL, 'hi', 1.0)"
                )
            )
        # the call log, tool calls, run liveness, rollout origin, run membership
        assert migrate(engine) == [4, 5, 6, 7, 8]
    finally:
        engine.dispose()
    with Store.for_workspace(tmp_path, url=backend) as opened:
        (call,) = opened.calls("r1")
        assert (call.id, call.purpose, call.run_id, call.prompt_tokens, call.reply) == (
            "r1:0",
            "policy",
            "run-a",
            11,
            "hi",
        )
        assert call.attempt_id is None and call.edit_id is None
        totals = opened.call_totals()
        assert list(totals) == ["policy"] and totals["policy"].cost_usd == 0.5


def test_migrated_schema_equals_table_models(store: Store, backend: str) -> None:
    engine = create_store_engine(backend)
    try:
        insp = inspect(engine)
        assert set(insp.get_table_names()) == {t.__tablename__ for t in TABLE_MODELS} | {
            MIGRATIONS_TABLE
        }
        for model in TABLE_MODELS:
            table = model.__table__  # type: ignore[attr-defined]
            name = table.name
            declared = {c.name: (c.nullable, python_type(c.type)) for c in table.columns}
            migrated = {
                c["name"]: (c["nullable"], python_type(c["type"])) for c in insp.get_columns(name)
            }
            assert migrated == declared, name
            assert insp.get_pk_constraint(name)["constrained_columns"] == [
                c.name for c in table.primary_key.columns
            ]
            declared_ix = {
                (ix.name, tuple(c.name for c in ix.columns), bool(ix.unique))
                for ix in table.indexes
            }
            migrated_ix = {
                (ix["name"], tuple(ix["column_names"]), bool(ix["unique"]))
                for ix in insp.get_indexes(name)
            }
            assert migrated_ix == declared_ix, name
            declared_fk = {
                (fk.parent.name, fk.column.table.name, fk.column.name) for fk in table.foreign_keys
            }
            migrated_fk = {
                (fk["constrained_columns"][0], fk["referred_table"], fk["referred_columns"][0])
                for fk in insp.get_foreign_keys(name)
            }
            assert migrated_fk == declared_fk, name
    finally:
        engine.dispose()


# --- rows ---


def test_record_and_lookup_roundtrip(store: Store) -> None:
    calls = [
        ModelCallRow(idx=i, model="sim/dbbench", prompt_tokens=10 * i, reply=f"r{i}")
        for i in (2, 0, 1)
    ]
    row = store.record_rollout(make_rollout("k1", cost_usd=0.25), calls, {"steps": ["a"]})
    got = store.get_by_cache_keys(["k1", "missing"])
    assert list(got) == ["k1"]
    assert (got["k1"].id, got["k1"].success, got["k1"].cost_usd, got["k1"].seed) == (
        row.id,
        True,
        0.25,
        7,
    )
    assert [(c.id, c.idx, c.rollout_id, c.reply) for c in store.calls(row.id)] == [
        (f"{row.id}:{i}", i, row.id, f"r{i}") for i in (0, 1, 2)
    ]


def test_trajectories_stay_in_the_workspace(store: Store, tmp_path: Path) -> None:
    row = store.record_rollout(make_rollout("k"), [], {"messages": ["héllo ✓"]})
    assert trajectory_files(tmp_path) == [
        tmp_path / ".harnessctl" / "trajectories" / row.trajectory_path
    ]
    assert store.trajectory_data(store.rollout(row.id)) == {"messages": ["héllo ✓"]}


def test_same_cache_key_twice_keeps_one_row_and_one_file(store: Store, tmp_path: Path) -> None:
    first = store.record_rollout(make_rollout("k1"), [ModelCallRow(idx=0)], {"v": 1})
    second = store.record_rollout(
        make_rollout("k1", outcome="wrong_answer"), [ModelCallRow(idx=0)], {"v": 2}
    )
    assert second.id == first.id and second.outcome == "success"
    assert [r.id for r in store.rollouts()] == [first.id]
    assert len(store.calls(first.id)) == 1
    assert len(trajectory_files(tmp_path)) == 1
    assert store.trajectory_data(second) == {"v": 1}


def test_batch_lookup_spans_many_chunks(store: Store) -> None:
    for key in ("a", "b", "c"):
        store.record_rollout(make_rollout(key), [], {})
    keys = [f"absent{i}" for i in range(1200)] + ["c", "a", "b", "a"]
    assert sorted(store.get_by_cache_keys(keys)) == ["a", "b", "c"]
    assert store.get_by_cache_keys([]) == {}


def test_failed_insert_leaves_no_row_and_no_file(store: Store, tmp_path: Path) -> None:
    broken = make_rollout("k")
    broken.outcome = None  # type: ignore[assignment]  # violates NOT NULL
    with pytest.raises(Exception, match="(?i)not.null"):
        store.record_rollout(broken, [], {"v": 1})
    assert store.rollouts() == [] and trajectory_files(tmp_path) == []


def test_reused_id_under_another_key_is_refused(store: Store) -> None:
    first = store.record_rollout(make_rollout("k1"), [], {"v": 1})
    with pytest.raises(HarnessctlError, match=f"{first.id} is already recorded under cache key k1"):
        store.record_rollout(make_rollout("k2", id=first.id), [], {"v": 2})
    assert store.trajectory_data(first) == {"v": 1}


def test_prefix_lookup_treats_wildcards_literally(store: Store) -> None:
    a = store.record_rollout(make_rollout("k1", id="abcd1111" + "0" * 24), [], {})
    b = store.record_rollout(make_rollout("k2", id="abcd2222" + "0" * 24), [], {})
    assert store.rollout("abcd1").id == a.id
    with pytest.raises(HarnessctlError, match=f"'abcd' is ambiguous \\({a.id}, {b.id}\\)"):
        store.rollout("abcd")
    with pytest.raises(HarnessctlError, match="no rollout"):
        store.rollout("ab_d")
    with pytest.raises(HarnessctlError, match="no rollout"):
        store.rollout("abc%")


def test_rollout_filters(store: Store) -> None:
    store.record_rollout(make_rollout("k1", harness_hash="h1", split="dev", run_id="r1"), [], {})
    store.record_rollout(make_rollout("k2", harness_hash="h2", split="dev", run_id="r1"), [], {})
    store.record_rollout(make_rollout("k3", harness_hash="h2", split="test", run_id="r2"), [], {})

    def keys(found: list[RolloutRow]) -> list[str]:
        return [r.cache_key for r in found]

    assert keys(store.rollouts(harness_hash="h2")) == ["k2", "k3"]
    assert keys(store.rollouts(harness_hash="h2", split="dev")) == ["k2"]
    assert keys(store.rollouts(run_id="r1")) == ["k1", "k2"]
    assert keys(store.rollouts(suite="other")) == []


def test_run_lifecycle(store: Store) -> None:
    run = store.start_run(RunRow(command="evaluate", suite="dbbench", split="dev"))
    assert store.run(run.id).status == "running" and store.run(run.id).finished_at is None
    store.finish_run(run.id, "done", {"success": 0.5})
    done = store.run(run.id)
    assert (done.status, done.summary_json) == ("done", '{"success": 0.5}')
    with pytest.raises(HarnessctlError, match="no run with id 'nope'"):
        store.finish_run("nope", "failed", None)


def test_upsert_harness_updates_in_place(store: Store, backend: str) -> None:
    store.upsert_harness(HarnessRow(hash="h1", name="base", path="harnesses/base", created_at=1.0))
    store.upsert_harness(
        HarnessRow(hash="h1", name="renamed", path="p", manifest_json='{"a": 1}', created_at=2.0)
    )
    assert rows(backend, "SELECT hash, name, path, manifest_json, created_at FROM harness") == [
        ("h1", "renamed", "p", '{"a": 1}', 1.0)
    ]


def test_attempts_edits_and_profiles(store: Store) -> None:
    store.record_attempt(AttemptRow(cache_key="k", run_id="r1", error="died", created_at=1.0))
    store.record_attempt(AttemptRow(cache_key="k", run_id="r2", error="down", created_at=2.0))
    assert [a.error for a in store.attempts(cache_key="k")] == ["died", "down"]

    first = store.record_edit(make_edit(status="evaluated", accepted=False))
    store.record_edit(make_edit(status="accepted", accepted=True))
    assert [(e.id, e.status, e.accepted) for e in store.edits(evolve_id="ev")] == [
        (first.id, "accepted", True)
    ]

    old = store.record_profile(make_profile(created_at=1.0))
    new = store.record_profile(make_profile(created_at=2.0))
    assert [p.id for p in store.profiles(harness_hash="h1")] == [new.id]
    assert [(p.id, p.current) for p in store.profiles(current=None)] == [
        (old.id, False),
        (new.id, True),
    ]


def test_one_call_log_for_rollouts_attempts_editors_and_voters(store: Store) -> None:
    store.record_rollout(
        make_rollout("k", id="r1"), [ModelCallRow(idx=0, prompt_tokens=5, cost_usd=0.25)], {}
    )
    attempt = AttemptRow(cache_key="k", run_id="run1", outcome="infra_error")
    store.record_attempt(attempt, [ModelCallRow(idx=0, prompt_tokens=7, status="ok")])
    editor = HostCall.of("m", {"api_key": "sk-secret", "temperature": 0}, 1.0)
    editor.cost_usd, editor.completion_tokens = 1.5, 9
    store.record_calls([editor], purpose="editor", edit_id="e1")
    store.record_calls([HostCall("v", "ok", 3, 1, 0.125)], purpose="voter", run_id="run9")
    assert [c.id for c in store.calls(attempt_id=attempt.id)] == [f"{attempt.id}:0"]
    (logged,) = store.calls(edit_id="e1")
    assert logged.purpose == "editor" and logged.rollout_id is None
    assert json.loads(logged.params_json or "{}") == {"api_key": "***", "temperature": 0}
    totals = store.call_totals()
    assert {p: (t.calls, t.total_tokens, t.cost_usd) for p, t in totals.items()} == {
        "editor": (1, 9, 1.5),
        "policy": (2, 12, 0.25),
        "voter": (1, 4, 0.125),
    }
    assert list(store.call_totals(run_id="run1")) == ["policy"]
    assert store.call_totals(purpose="editor", run_id="nope") == {}


# --- concurrency ---


def race(threads: int, work: Callable[[int], None]) -> list[BaseException]:
    """Run ``work(0..threads-1)`` on threads released together; the exceptions they raised."""
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            barrier.wait()
            work(n)
        except BaseException as exc:  # surfaced by the caller: a thread cannot fail a test
            errors.append(exc)

    started = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return errors


def test_threads_racing_on_the_same_keys(store: Store, backend: str, tmp_path: Path) -> None:
    keys = [f"k{i}" for i in range(30)]
    results: list[dict[str, str]] = []

    def worker(seed: int) -> None:
        order = keys[:]
        random.Random(seed).shuffle(order)
        got: dict[str, str] = {}
        results.append(got)
        for key in order:
            row = store.record_rollout(make_rollout(key), [ModelCallRow(idx=0)], {"k": key})
            got[key] = row.id

    assert race(6, worker) == []
    recorded = store.rollouts()
    assert sorted(r.cache_key for r in recorded) == sorted(keys)
    ids = {r.cache_key: r.id for r in recorded}
    assert all(got == ids for got in results)  # every thread was handed the winning row
    assert len(trajectory_files(tmp_path)) == 30  # losers' files were removed
    assert all(store.trajectory_data(r) == {"k": r.cache_key} for r in recorded)
    assert rows(backend, "SELECT count(*) FROM model_call") == [(30,)]


def test_threads_racing_on_an_edit_and_a_profile_key(store: Store) -> None:
    """Upserting one edit key and making one profile key current, from 6 threads at once."""

    def worker(n: int) -> None:
        store.record_edit(make_edit(response=f"r{n}"))
        store.record_profile(make_profile(created_at=float(n)))

    assert race(6, worker) == []
    assert len(store.edits(evolve_id="ev")) == 1
    history = store.profiles(current=None)
    assert len(history) == 6 and sum(p.current for p in history) == 1
    assert [p.id for p in store.profiles(harness_hash="h1")] == [
        next(p.id for p in history if p.current)
    ]


WRITER = textwrap.dedent("""
    import random, sys
    from pathlib import Path
    from harnessctl.store import ModelCallRow, RolloutRow, Store
    workspace, url, seed = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    keys = [f"k{i}" for i in range(40)]
    random.Random(seed).shuffle(keys)
    with Store.for_workspace(workspace, url=url) as store:
        for key in keys:
            row = RolloutRow(cache_key=key, run_id=f"r{seed}", harness_hash="h", task_id=key,
                             policy_id="p", outcome="success", success=True)
            store.record_rollout(row, [ModelCallRow(idx=0), ModelCallRow(idx=1)], {"k": key})
            print(key, store.get_by_cache_keys([key])[key].id, flush=True)
""")


@pytest.mark.slow
def test_processes_racing_on_a_fresh_store(backend: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), backend, str(seed)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (1, 2, 3)
    ]
    seen: list[dict[str, str]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        seen.append(dict(line.split() for line in out.splitlines()))
    every = [(m.number,) for m in load_migrations()]
    assert rows(backend, f"SELECT number FROM {MIGRATIONS_TABLE} ORDER BY number") == every
    recorded = dict(rows(backend, "SELECT cache_key, id FROM rollout"))
    assert sorted(recorded) == sorted(f"k{i}" for i in range(40))
    assert all(got == recorded for got in seen)  # every process saw the same winners
    assert rows(backend, "SELECT count(*) FROM model_call") == [(80,)]
    assert len(trajectory_files(tmp_path)) == 40
