"""The store on real SQLite files: migrations, schema, rollouts, trajectories, concurrency."""

from __future__ import annotations

import gzip
import json
import os
import random
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.types import TypeDecorator, TypeEngine

from harnessctl.constants import ENV_STORE_URL
from harnessctl.errors import HarnessctlError
from harnessctl.store import AttemptRow, HarnessRow, ModelCallRow, RolloutRow, RunRow, Store
from harnessctl.store.engine import create_store_engine
from harnessctl.store.migrate import MIGRATIONS_TABLE, load_migrations, migrate
from harnessctl.store.models import TABLE_MODELS

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_env_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_STORE_URL, raising=False)


@pytest.fixture
def store(tmp_path: Path):
    with Store.for_workspace(tmp_path) as opened:
        yield opened


def make_rollout(key: str, **fields: Any) -> RolloutRow:
    values: dict[str, Any] = {
        "cache_key": key,
        "run_id": "run1",
        "harness_hash": "h1",
        "task_id": f"task-{key}",
        "policy_id": "sim/dbbench",
        "outcome": "success",
        "success": True,
        "reward": 1.0,
        "seed": 7,
    }
    values.update(fields)
    return RolloutRow(**values)


def trajectory_files(workspace: Path) -> list[Path]:
    return sorted((workspace / ".harnessctl" / "trajectories").rglob("*.json.gz"))


def db_rows(workspace: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(workspace / ".harnessctl" / "store.db") as conn:
        return conn.execute(sql).fetchall()


# --- opening and migrations ---


def test_import_does_not_load_sqlalchemy() -> None:
    code = (
        "import sys, harnessctl.store; "
        "print(sorted(m for m in ('sqlmodel', 'sqlalchemy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "[]"


def test_migrations_applied_once_and_reopen_is_noop(tmp_path: Path) -> None:
    Store.for_workspace(tmp_path).close()
    first = db_rows(tmp_path, f"SELECT number, name, applied_at FROM {MIGRATIONS_TABLE}")
    assert [(n, name) for n, name, _ in first] == [(1, "initial"), (2, "edits"), (3, "profiles")]
    Store.for_workspace(tmp_path).close()
    assert db_rows(tmp_path, f"SELECT number, name, applied_at FROM {MIGRATIONS_TABLE}") == first
    engine = create_store_engine(f"sqlite:///{tmp_path / '.harnessctl' / 'store.db'}")
    assert migrate(engine) == []
    engine.dispose()


def write_migrations(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, sql in files.items():
        (folder / name).write_text(sql)
    return folder


def test_new_migrations_apply_in_order_and_only_once(tmp_path: Path) -> None:
    folder = write_migrations(
        tmp_path / "m",
        {
            "0001_one.sql": "-- a comment; with a semicolon\nCREATE TABLE a (id TEXT NOT NULL);\n",
            "0002_two.sql": "ALTER TABLE a ADD COLUMN x INTEGER;\nCREATE TABLE b (id TEXT);",
        },
    )
    migrations = load_migrations(folder)
    assert [(m.number, m.name, len(m.statements)) for m in migrations] == [
        (1, "one", 1),
        (2, "two", 2),
    ]
    engine = create_store_engine(f"sqlite:///{tmp_path / 'x.db'}")
    assert migrate(engine, migrations[:1]) == [1]
    assert migrate(engine, migrations) == [2]
    assert migrate(engine, migrations) == []
    assert {c["name"] for c in inspect(engine).get_columns("a")} == {"id", "x"}
    # A database migrated by a newer harnessctl is refused, not silently used.
    with pytest.raises(HarnessctlError, match=r"migrations \[2\].*upgrade"):
        migrate(engine, migrations[:1])
    engine.dispose()


def test_migration_numbering_gaps_are_rejected(tmp_path: Path) -> None:
    folder = write_migrations(
        tmp_path / "m", {"0001_a.sql": "SELECT 1;", "0003_c.sql": "SELECT 1;"}
    )
    with pytest.raises(HarnessctlError, match="without gaps"):
        load_migrations(folder)


def test_failed_migration_rolls_back_entirely(tmp_path: Path) -> None:
    folder = write_migrations(
        tmp_path / "m", {"0001_bad.sql": "CREATE TABLE good (id TEXT);\nCREATE TABLE broken (;\n"}
    )
    engine = create_store_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(HarnessctlError, match="migration 0001_bad failed"):
        migrate(engine, load_migrations(folder))
    # DDL is transactional: the first statement is undone and nothing is recorded.
    assert not inspect(engine).has_table("good")
    with engine.connect() as conn:
        assert conn.execute(text(f"SELECT count(*) FROM {MIGRATIONS_TABLE}")).scalar() == 0
    engine.dispose()


def python_type(sql_type: TypeEngine) -> type:
    # sqlmodel's AutoString is a TypeDecorator whose own python_type is ``object``.
    if isinstance(sql_type, TypeDecorator):
        sql_type = sql_type.impl_instance
    return sql_type.python_type


def test_migrated_schema_equals_table_models(store: Store, tmp_path: Path) -> None:
    engine = create_store_engine(store.url)
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
            (ix.name, tuple(c.name for c in ix.columns), bool(ix.unique)) for ix in table.indexes
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
    engine.dispose()


def test_sqlite_runs_in_wal_with_busy_timeout_and_foreign_keys(store: Store) -> None:
    engine = create_store_engine(store.url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


def test_env_url_is_honoured_and_argument_beats_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere" / "env.db"
    monkeypatch.setenv(ENV_STORE_URL, f"sqlite:///{elsewhere}")
    with Store.for_workspace(tmp_path / "ws") as opened:
        assert opened.url == f"sqlite:///{elsewhere}"
        opened.record_rollout(make_rollout("k"), [], {"t": 1})
    assert sqlite3.connect(elsewhere).execute("SELECT cache_key FROM rollout").fetchall() == [
        ("k",)
    ]
    assert not (tmp_path / "ws" / ".harnessctl" / "store.db").exists()
    explicit = tmp_path / "explicit.db"
    with Store.for_workspace(tmp_path / "ws", url=f"sqlite:///{explicit}") as opened:
        assert opened.rollouts() == []
    assert explicit.exists()


def test_bad_url_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessctlError, match="store nosuchdb://x: cannot open"):
        Store("nosuchdb://x", tmp_path)


def test_in_memory_store_works(tmp_path: Path) -> None:
    with Store("sqlite://", tmp_path / "traj") as opened:
        row = opened.record_rollout(make_rollout("k"), [ModelCallRow(idx=0)], {"x": 1})
        assert opened.rollout(row.id).cache_key == "k"
        assert [c.idx for c in opened.calls(row.id)] == [0]


# --- rollouts ---


def test_record_and_lookup_roundtrip(store: Store, tmp_path: Path) -> None:
    calls = [
        ModelCallRow(idx=i, model="sim/dbbench", prompt_tokens=10 * i, reply=f"r{i}")
        for i in (2, 0, 1)
    ]
    row = store.record_rollout(make_rollout("k1", cost_usd=0.25), calls, {"steps": ["a"]})
    assert row.trajectory_path == f"{row.id[:2]}/{row.id}.json.gz"
    got = store.get_by_cache_keys(["k1", "missing"])
    assert list(got) == ["k1"]
    assert (got["k1"].id, got["k1"].success, got["k1"].cost_usd, got["k1"].seed) == (
        row.id,
        True,
        0.25,
        7,
    )
    stored_calls = store.calls(row.id)
    assert [(c.id, c.idx, c.rollout_id, c.reply) for c in stored_calls] == [
        (f"{row.id}:{i}", i, row.id, f"r{i}") for i in (0, 1, 2)
    ]


def test_same_cache_key_twice_keeps_one_row_and_one_file(store: Store, tmp_path: Path) -> None:
    first = store.record_rollout(make_rollout("k1"), [ModelCallRow(idx=0)], {"v": 1})
    second = store.record_rollout(
        make_rollout("k1", outcome="wrong_answer"), [ModelCallRow(idx=0)], {"v": 2}
    )
    assert second.id == first.id and second.outcome == "success"
    assert [r.id for r in store.rollouts()] == [first.id]
    assert len(store.calls(first.id)) == 1
    assert trajectory_files(tmp_path) == [
        tmp_path / ".harnessctl/trajectories" / first.trajectory_path
    ]
    assert store.trajectory(second) == {"v": 1}


def test_batch_lookup_spans_many_chunks(store: Store) -> None:
    for key in ("a", "b", "c"):
        store.record_rollout(make_rollout(key), [], {})
    keys = [f"absent{i}" for i in range(1200)] + ["c", "a", "b", "a"]
    assert sorted(store.get_by_cache_keys(keys)) == ["a", "b", "c"]
    assert store.get_by_cache_keys([]) == {}


def test_rows_stay_readable_after_store_closes(tmp_path: Path) -> None:
    with Store.for_workspace(tmp_path) as opened:
        opened.record_rollout(make_rollout("k", task_id="t9"), [ModelCallRow(idx=0)], {})
        rows = opened.rollouts()
        calls = opened.calls(rows[0].id)
    assert (rows[0].task_id, rows[0].outcome, calls[0].idx) == ("t9", "success", 0)


def test_failed_insert_leaves_no_row_and_no_file(store: Store, tmp_path: Path) -> None:
    broken = make_rollout("k")
    broken.outcome = None  # type: ignore[assignment]  # violates NOT NULL
    with pytest.raises(Exception, match="NOT NULL"):
        store.record_rollout(broken, [], {"v": 1})
    assert store.rollouts() == [] and trajectory_files(tmp_path) == []


def test_reused_id_under_another_key_is_refused(store: Store) -> None:
    first = store.record_rollout(make_rollout("k1"), [], {"v": 1})
    with pytest.raises(HarnessctlError, match=f"{first.id} is already recorded under cache key k1"):
        store.record_rollout(make_rollout("k2", id=first.id), [], {"v": 2})
    assert store.trajectory(first) == {"v": 1}


def test_prefix_lookup(store: Store) -> None:
    a = store.record_rollout(make_rollout("k1", id="abcd1111" + "0" * 24), [], {})
    b = store.record_rollout(make_rollout("k2", id="abcd2222" + "0" * 24), [], {})
    assert store.rollout("abcd1").id == a.id
    assert store.rollout(b.id).id == b.id
    with pytest.raises(HarnessctlError, match=f"'abcd' is ambiguous \\({a.id}, {b.id}\\)"):
        store.rollout("abcd")
    with pytest.raises(HarnessctlError, match="no rollout with an id starting with 'ffff'"):
        store.rollout("ffff")
    with pytest.raises(HarnessctlError, match="no rollout"):
        store.rollout("ab_d")  # LIKE wildcards in the prefix are literal
    with pytest.raises(HarnessctlError, match="at least 4 characters"):
        store.rollout("abc")


def test_rollout_filters(store: Store) -> None:
    store.record_rollout(make_rollout("k1", harness_hash="h1", split="dev", run_id="r1"), [], {})
    store.record_rollout(make_rollout("k2", harness_hash="h2", split="dev", run_id="r1"), [], {})
    store.record_rollout(make_rollout("k3", harness_hash="h2", split="test", run_id="r2"), [], {})
    keys = lambda rows: [r.cache_key for r in rows]  # noqa: E731
    assert keys(store.rollouts(harness_hash="h2")) == ["k2", "k3"]
    assert keys(store.rollouts(harness_hash="h2", split="dev")) == ["k2"]
    assert keys(store.rollouts(run_id="r1")) == ["k1", "k2"]
    assert keys(store.rollouts(task_id="task-k3", policy_id="sim/dbbench")) == ["k3"]
    assert keys(store.rollouts(suite="other")) == []


# --- trajectories ---


def test_trajectory_roundtrip_is_gzip_json(store: Store, tmp_path: Path) -> None:
    trajectory = {"messages": [{"role": "user", "content": "héllo ✓"}], "n": [1, 2.5, None]}
    row = store.record_rollout(make_rollout("k"), [], trajectory)
    path = tmp_path / ".harnessctl" / "trajectories" / row.id[:2] / f"{row.id}.json.gz"
    assert json.loads(gzip.decompress(path.read_bytes())) == trajectory
    assert store.trajectory(store.rollout(row.id)) == trajectory
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp files left


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: p.unlink(), "missing"),
        (lambda p: p.write_bytes(b"not gzip"), "corrupt"),
        (lambda p: p.write_bytes(p.read_bytes()[:-12]), "corrupt"),
        (lambda p: p.write_bytes(gzip.compress(b"[1, 2]")), "corrupt"),
    ],
)
def test_damaged_trajectory_names_the_file(store: Store, tmp_path: Path, damage, message) -> None:
    row = store.record_rollout(make_rollout("k"), [], {"long": "x" * 1000})
    path = tmp_path / ".harnessctl" / "trajectories" / row.trajectory_path
    damage(path)
    with pytest.raises(HarnessctlError, match=f"trajectory file {path}: {message}"):
        store.trajectory(row)


# --- runs, harnesses, attempts ---


def test_run_lifecycle(store: Store) -> None:
    run = store.start_run(
        RunRow(
            command="evaluate",
            suite="dbbench",
            split="dev",
            policy_id="sim/dbbench",
            params_json='{"n": 3}',
        )
    )
    assert store.run(run.id).status == "running" and store.run(run.id).finished_at is None
    store.finish_run(run.id, "done", {"success": 0.5})
    done = store.run(run.id)
    assert (done.status, json.loads(done.summary_json or "")) == ("done", {"success": 0.5})
    assert done.finished_at is not None and done.finished_at >= done.started_at
    with pytest.raises(HarnessctlError, match="'finished' is not one of running, done"):
        store.finish_run(run.id, "finished", None)
    with pytest.raises(HarnessctlError, match="no run with id 'nope'"):
        store.finish_run("nope", "failed", None)


def test_upsert_harness_updates_in_place(store: Store, tmp_path: Path) -> None:
    store.upsert_harness(
        HarnessRow(hash="h1", name="base", path="harnesses/base", created_at=100.0)
    )
    store.upsert_harness(
        HarnessRow(
            hash="h1",
            name="renamed",
            path="harnesses/r",
            manifest_json='{"a": 1}',
            created_at=200.0,
        )
    )
    assert db_rows(tmp_path, "SELECT hash, name, path, manifest_json, created_at FROM harness") == [
        ("h1", "renamed", "harnesses/r", '{"a": 1}', 100.0)
    ]


def test_attempts_are_kept(store: Store) -> None:
    store.record_attempt(
        AttemptRow(
            cache_key="k", run_id="r1", outcome="infra_error", error="sandbox died", created_at=1.0
        )
    )
    store.record_attempt(
        AttemptRow(
            cache_key="k", run_id="r2", outcome="infra_error", error="gateway down", created_at=2.0
        )
    )
    assert [a.error for a in store.attempts(cache_key="k")] == ["sandbox died", "gateway down"]
    assert [a.run_id for a in store.attempts(run_id="r2")] == ["r2"]


# --- concurrency ---


def test_threads_racing_on_the_same_keys(store: Store, tmp_path: Path) -> None:
    keys = [f"k{i}" for i in range(30)]
    barrier = threading.Barrier(6)
    results: list[dict[str, str]] = []
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        order = keys[:]
        random.Random(seed).shuffle(order)
        got: dict[str, str] = {}
        try:
            barrier.wait()
            for key in order:
                row = store.record_rollout(make_rollout(key), [ModelCallRow(idx=0)], {"k": key})
                got[key] = row.id
        except BaseException as exc:  # surfaced below: a thread cannot fail the test itself
            errors.append(exc)
        results.append(got)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    rows = store.rollouts()
    assert sorted(r.cache_key for r in rows) == sorted(keys)
    ids = {r.cache_key: r.id for r in rows}
    assert all(got == ids for got in results)  # every thread was handed the winning row
    assert len(trajectory_files(tmp_path)) == 30  # losers' files were removed
    assert all(store.trajectory(r) == {"k": r.cache_key} for r in rows)
    assert db_rows(tmp_path, "SELECT count(*) FROM model_call") == [(30,)]


WRITER = textwrap.dedent("""
    import random, sys
    from pathlib import Path
    from harnessctl.store import ModelCallRow, RolloutRow, Store
    workspace, seed = Path(sys.argv[1]), int(sys.argv[2])
    keys = [f"k{i}" for i in range(40)]
    random.Random(seed).shuffle(keys)
    with Store.for_workspace(workspace) as store:
        for key in keys:
            row = RolloutRow(cache_key=key, run_id=f"r{seed}", harness_hash="h", task_id=key,
                             policy_id="p", outcome="success", success=True)
            store.record_rollout(row, [ModelCallRow(idx=0), ModelCallRow(idx=1)], {"k": key})
""")


def test_two_processes_racing_on_a_fresh_store(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(ENV_STORE_URL, None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(seed)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (1, 2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    assert db_rows(tmp_path, f"SELECT number FROM {MIGRATIONS_TABLE}") == [(1,), (2,), (3,)]
    keys = [k for (k,) in db_rows(tmp_path, "SELECT cache_key FROM rollout ORDER BY cache_key")]
    assert keys == sorted(f"k{i}" for i in range(40))
    assert db_rows(tmp_path, "SELECT count(*) FROM model_call") == [(80,)]
    assert len(trajectory_files(tmp_path)) == 40
