"""Read-through rollout caches: a store serves another store's matching rollouts, copied in
with their calls and trajectories and marked with their origin; a cache is untrusted data."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from harnessctl.errors import ConfigError
from harnessctl.run.evaluate import evaluate
from harnessctl.store import Store
from harnessctl.workspace import load_workspace
from tests.helpers.cli import invoke


def _store(tmp_path: Path, *caches: Path) -> Store:
    state = tmp_path / "state"
    return Store(f"sqlite:///{state / 'store.db'}", state / "trajectories", caches)


def test_a_cache_serves_matching_rollouts_with_their_calls_and_trajectories(
    cache, tmp_path, eval_request
):
    with Store(f"sqlite:///{cache / 'store.db'}", cache / "trajectories") as source:
        theirs = {r.cache_key: r for r in source.rollouts()}
        their_calls = {k: len(source.calls(r.id)) for k, r in theirs.items()}
    with _store(tmp_path, cache) as store:
        result = evaluate(eval_request(rollouts=3), store)  # six in the cache, three more to run
        assert (result.cached, result.executed) == (6, 3)
        rows = {r.cache_key: r for r in store.rollouts()}
        assert len(rows) == 9
        copied = [r for r in rows.values() if r.origin]
        assert {r.cache_key for r in copied} == set(theirs)
        assert {r.origin for r in copied} == {str(cache)}
        assert all(not r.origin for k, r in rows.items() if k not in theirs)
        for row in copied:
            assert (row.outcome, row.seed, row.task_id) == (
                theirs[row.cache_key].outcome,
                theirs[row.cache_key].seed,
                theirs[row.cache_key].task_id,
            )
            assert store.trajectory(row).rollout_id == row.id  # the file was copied here
            assert (store.trajectory_dir / row.trajectory_path).is_file()
            assert len(store.calls(row.id)) == their_calls[row.cache_key]
        again = evaluate(eval_request(rollouts=3), store)  # now all the store's own
        assert (again.cached, again.executed) == (9, 0)
    db = sqlite3.connect(f"file:{cache / 'store.db'}?mode=ro", uri=True)
    assert db.execute("SELECT COUNT(*), MAX(origin) FROM rollout").fetchone() == (6, "")
    db.close()
    assert len(list((cache / "trajectories").rglob("*.json.gz"))) == 6  # the cache unchanged


def test_a_workspace_reads_through_the_caches_it_is_pointed_at(
    cache, workspace, monkeypatch, eval_request
):
    config = workspace / "harnessctl.yaml"
    config.write_text(config.read_text() + f"cache_from: [{cache}]\n")
    with load_workspace(workspace).open_store() as store:
        assert store.cache_from == [cache]
        assert evaluate(eval_request(), store).cached == 6
    listed = invoke("rollouts", "--json")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)["rollouts"]
    assert len(rows) == 6 and {r["origin"] for r in rows} == {str(cache)}
    table = invoke("rollouts")
    assert "from cache" in table.stdout and str(cache)[:20] in table.stdout.replace("\n", "")
    monkeypatch.setenv("HARNESSCTL_CACHE_FROM", "")  # the variable wins, even empty
    assert load_workspace(workspace).cache_from() == []


def test_a_cache_is_validated_and_bad_rows_run_instead(cache, tmp_path, eval_request):
    bad = tmp_path / "bad"
    shutil.copytree(cache, bad)
    db = sqlite3.connect(bad / "store.db")
    ids = [r[0] for r in db.execute("SELECT id FROM rollout ORDER BY id")]
    db.execute("UPDATE rollout SET outcome = 'pwned' WHERE id = ?", (ids[0],))
    db.execute("UPDATE rollout SET success = 1, outcome = 'wrong_answer' WHERE id = ?", (ids[1],))
    db.execute("UPDATE rollout SET trajectory_path = '../../../etc/passwd' WHERE id = ?", (ids[2],))
    db.commit()
    db.close()
    # another rollout's trajectory in place of the fourth's; the fifth's file is garbage
    files = {p.name.split(".")[0]: p for p in (bad / "trajectories").rglob("*.json.gz")}
    shutil.copy(files[ids[0]], files[ids[3]])
    files[ids[4]].write_bytes(b"\x1f\x8b not gzip")
    with _store(tmp_path, bad) as store:
        result = evaluate(eval_request(), store)
        origins = {r.id: r.origin for r in store.rollouts()}
    # ids[2]'s row is valid: its path is made here from its id, never read from the cache
    assert result.cached == 2 and result.executed == 4
    assert {i for i, o in origins.items() if o} == {ids[2], ids[5]}


def test_a_cache_of_another_schema_or_not_a_store_is_a_config_error(cache, tmp_path, eval_request):
    with (
        pytest.raises(ConfigError, match="not a rollout cache"),
        _store(tmp_path, tmp_path / "nowhere") as store,
    ):
        evaluate(eval_request(), store)
    old = tmp_path / "old"
    shutil.copytree(cache, old)
    db = sqlite3.connect(old / "store.db")
    db.execute("DELETE FROM harnessctl_migrations WHERE number >= 7")
    db.commit()
    db.close()
    with (
        pytest.raises(ConfigError, match="schema 6.*never migrated"),
        _store(tmp_path, old) as store,
    ):
        evaluate(eval_request(), store)


def test_the_cache_trajectory_is_read_bounded(cache, tmp_path, monkeypatch, eval_request):
    import harnessctl.store.cachebounds as cachebounds

    big = tmp_path / "big"
    shutil.copytree(cache, big)
    monkeypatch.setattr(cachebounds, "MAX_TRAJECTORY_BYTES", 200)
    path = next((big / "trajectories").rglob("*.json.gz"))
    with gzip.open(path) as gz:
        assert len(json.loads(gz.read())) > 0  # a real trajectory, far over 200 bytes
    with _store(tmp_path, big) as store:
        assert evaluate(eval_request(), store).cached == 0
