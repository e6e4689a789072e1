"""The store on real SQLite files: migrations, schema, rollouts, trajectories, concurrency."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy.types import TypeDecorator, TypeEngine

from harnessctl.constants import ENV_STORE_URL
from harnessctl.errors import HarnessctlError
from harnessctl.store import AttemptRow, ModelCallRow, Store
from harnessctl.store.engine import create_store_engine
from harnessctl.store.migrate import MIGRATIONS_TABLE, load_migrations
from tests.helpers import ROOT
from tests.helpers.stores import make_rollout, trajectory_files

REPO = ROOT


@pytest.fixture(autouse=True)
def _no_env_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_STORE_URL, raising=False)


@pytest.fixture
def store(tmp_path: Path):
    with Store.for_workspace(tmp_path) as opened:
        yield opened


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


def write_migrations(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, sql in files.items():
        (folder / name).write_text(sql)
    return folder


def test_migration_numbering_gaps_are_rejected(tmp_path: Path) -> None:
    folder = write_migrations(
        tmp_path / "m", {"0001_a.sql": "SELECT 1;", "0003_c.sql": "SELECT 1;"}
    )
    with pytest.raises(HarnessctlError, match="without gaps"):
        load_migrations(folder)


def python_type(sql_type: TypeEngine) -> type:
    # sqlmodel's AutoString is a TypeDecorator whose own python_type is ``object``.
    if isinstance(sql_type, TypeDecorator):
        sql_type = sql_type.impl_instance
    return sql_type.python_type


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


def test_rows_stay_readable_after_store_closes(tmp_path: Path) -> None:
    with Store.for_workspace(tmp_path) as opened:
        opened.record_rollout(make_rollout("k", task_id="t9"), [ModelCallRow(idx=0)], {})
        rows = opened.rollouts()
        calls = opened.calls(rows[0].id)
    assert (rows[0].task_id, rows[0].outcome, calls[0].idx) == ("t9", "success", 0)


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


# --- trajectories ---


def test_trajectory_roundtrip_is_gzip_json(store: Store, tmp_path: Path) -> None:
    trajectory = {"messages": [{"role": "user", "content": "héllo ✓"}], "n": [1, 2.5, None]}
    row = store.record_rollout(make_rollout("k"), [], trajectory)
    path = tmp_path / ".harnessctl" / "trajectories" / row.id[:2] / f"{row.id}.json.gz"
    assert json.loads(gzip.decompress(path.read_bytes())) == trajectory
    assert store.trajectory_data(store.rollout(row.id)) == trajectory
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
    every = [(m.number,) for m in load_migrations()]
    assert db_rows(tmp_path, f"SELECT number FROM {MIGRATIONS_TABLE}") == every
    keys = [k for (k,) in db_rows(tmp_path, "SELECT cache_key FROM rollout ORDER BY cache_key")]
    assert keys == sorted(f"k{i}" for i in range(40))
    assert db_rows(tmp_path, "SELECT count(*) FROM model_call") == [(80,)]
    assert len(trajectory_files(tmp_path)) == 40


def test_a_damaged_store_file_is_named_with_how_to_recover_and_left_as_it_is(tmp_path):
    damaged = tmp_path / "store.db"
    damaged.write_bytes(b"not a sqlite file at all" * 100)
    before = damaged.read_bytes()
    with pytest.raises(HarnessctlError) as err:
        Store(f"sqlite:///{damaged}", tmp_path / "traj")
    message = str(err.value)
    assert str(damaged) in message and ".recover" in message and "move" in message
    assert damaged.read_bytes() == before
