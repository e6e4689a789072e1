"""A hostile read-through cache is contained: a compression bomb or a JSON expansion, an
endless recursive view and FIFOs in place of files are each refused within a bound of time
and memory, the cache is skipped with one warning naming it, and nothing of it lands in the
consumer's store (issue 53, item 5)."""

from __future__ import annotations

import gzip
import json
import logging
import os
import shutil
import sqlite3
import time
import tracemalloc
from pathlib import Path

import pytest

import harnessctl.store.cachebounds as cachebounds
from harnessctl.run.evaluate import evaluate
from harnessctl.store import Store

pytestmark = pytest.mark.timeout(120)  # each attack used to hang or take minutes


def _copy(cache: Path, tmp_path: Path) -> tuple[Path, list[tuple[str, str]]]:
    """A copy of the cache to attack, and its rollouts' (id, cache key), by id."""
    bad = tmp_path / "bad"
    shutil.copytree(cache, bad)
    db = sqlite3.connect(bad / "store.db")
    rows = db.execute("SELECT id, cache_key FROM rollout ORDER BY id").fetchall()
    db.close()
    return bad, rows


def _trajectory(bad: Path, rollout_id: str) -> Path:
    return bad / "trajectories" / rollout_id[:2] / f"{rollout_id}.json.gz"


def _consumer(tmp_path: Path, bad: Path) -> Store:
    state = tmp_path / "consumer"
    return Store(f"sqlite:///{state / 'store.db'}", state / "trajectories", [bad])


def _skipped_once(caplog, bad: Path, reason: str) -> None:
    said = [r.getMessage() for r in caplog.records if "skipped, its rollouts" in r.getMessage()]
    assert len(said) == 1, said
    assert str(bad) in said[0] and reason in said[0], said[0]


def _events_bomb(real: dict, item: bytes, count: int) -> bytes:
    """``real`` (a trajectory) with ``count`` copies of ``item`` as its events: its JSON."""
    text = json.dumps({**real, "events": []}, separators=(",", ":")).encode()
    at = text.index(b'"events":[') + len(b'"events":[')
    return text[:at] + b",".join([item] * count) + text[at:]


def test_a_compression_bomb_is_refused_before_it_is_parsed(cache, tmp_path, caplog):
    bad, rows = _copy(cache, tmp_path)
    path = _trajectory(bad, rows[-1][0])
    with gzip.open(path) as gz:
        real = json.load(gz)
    # the trajectory: 14 KB of gzip, 14 MB of JSON, 4.6 million dicts (about 700 MB
    # of host memory once parsed and validated; served, then copied to the consumer)
    path.write_bytes(gzip.compress(_events_bomb(real, b"{}", 4_600_000), 9))
    assert path.stat().st_size < 20_000
    keys = [key for _, key in rows]
    with _consumer(tmp_path, bad) as store:
        tracemalloc.start()
        start = time.monotonic()
        try:
            found = store.get_by_cache_keys(keys)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert found == {} and store.rollouts() == []  # the five good rows did not land either
        assert peak < 16 * 2**20 and time.monotonic() - start < 10
    _skipped_once(caplog, bad, "over 500000 objects and arrays")


def test_a_json_expansion_within_the_bytes_is_refused_by_its_count(cache, tmp_path, caplog):
    bad, rows = _copy(cache, tmp_path)
    path = _trajectory(bad, rows[0][0])
    with gzip.open(path) as gz:
        real = json.load(gz)
    # few containers, many values: a million two-letter strings in 5 MB
    bomb = _events_bomb(real, b'{"x":[' + b",".join([b'"ab"'] * 2_100_000) + b"]}", 1)
    path.write_bytes(gzip.compress(bomb, 9))
    with _consumer(tmp_path, bad) as store:
        assert store.get_by_cache_keys([key for _, key in rows]) == {}
    _skipped_once(caplog, bad, "over 2000000 JSON values")


def test_nesting_past_the_depth_is_a_bad_row_and_the_others_are_served(cache, tmp_path, caplog):
    bad, rows = _copy(cache, tmp_path)
    for (rollout_id, _), depth in zip(rows[:2], (80, 20_000), strict=True):
        path = _trajectory(bad, rollout_id)
        with gzip.open(path) as gz:
            real = json.load(gz)
        nested = b"[" * depth + b"]" * depth  # the deeper one overflows the parser's stack
        path.write_bytes(gzip.compress(_events_bomb(real, b'{"x":' + nested + b"}", 1)))
    with _consumer(tmp_path, bad) as store:
        found = store.get_by_cache_keys([key for _, key in rows])
        assert {r.id for r in found.values()} == {i for i, _ in rows[2:]}
        for row in found.values():
            assert store.trajectory(row).rollout_id == row.id
    said = [r.getMessage() for r in caplog.records if "skipped a row" in r.getMessage()]
    assert len(said) == 2 and all("nested deeper than 64" in s for s in said), said


def _endless_view(bad: Path) -> None:
    """The rollout table renamed and replaced by a view over an endless recursion that never
    yields a row: any query through it runs for ever."""
    db = sqlite3.connect(bad / "store.db")
    db.executescript(
        "PRAGMA legacy_alter_table = ON; ALTER TABLE rollout RENAME TO real_rollout;"
        "CREATE VIEW rollout AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
        " SELECT real_rollout.* FROM n, real_rollout WHERE n.i < 0;"
    )
    db.close()


def test_an_endless_recursive_view_is_refused_by_the_schema(cache, tmp_path, caplog, eval_request):
    bad, rows = _copy(cache, tmp_path)
    _endless_view(bad)
    start = time.monotonic()
    with _consumer(tmp_path, bad) as store:
        result = evaluate(eval_request(), store)  # used to hang here, with no timeout
        assert (result.cached, result.executed) == (0, 6)
        assert all(not r.origin for r in store.rollouts())
    assert time.monotonic() - start < 60
    _skipped_once(caplog, bad, "schema is not this harnessctl's (the view 'rollout'")


def test_a_query_past_its_budget_is_interrupted(cache, tmp_path, caplog, monkeypatch):
    """The time bound holds whatever the schema check lets through."""
    bad, rows = _copy(cache, tmp_path)
    _endless_view(bad)
    db = sqlite3.connect(bad / "store.db")
    theirs = cachebounds.schema_of(db)
    db.close()
    monkeypatch.setattr(cachebounds, "reference_schema", lambda: theirs)
    monkeypatch.setattr(cachebounds, "QUERY_SECONDS", 0.5)
    start = time.monotonic()
    with _consumer(tmp_path, bad) as store:
        assert store.get_by_cache_keys([key for _, key in rows]) == {}
        assert store.rollouts() == []
    assert time.monotonic() - start < 10
    _skipped_once(caplog, bad, "a query ran past 0.5 s (interrupted)")


@pytest.mark.parametrize("where", ["trajectory", "symlink", "sidecar"])
def test_fifos_and_links_in_place_of_files_are_not_opened(where, cache, tmp_path, caplog):
    bad, rows = _copy(cache, tmp_path)
    if where == "sidecar":  # SQLite itself would open it, and block
        os.mkfifo(bad / "store.db-wal")
        reason = "store.db-wal: not a regular file"
    else:  # the last row's: the rows before it are screened first and must not land
        path = _trajectory(bad, rows[-1][0])
        path.unlink()
        if where == "trajectory":
            os.mkfifo(path)
            reason = "not a regular file"
        else:
            path.symlink_to("/dev/zero")
            reason = "not a regular file (Too many levels of symbolic links)"
    with _consumer(tmp_path, bad) as store:
        assert store.get_by_cache_keys([key for _, key in rows]) == {}
        assert store.rollouts() == []
    _skipped_once(caplog, bad, reason)


def test_oversized_values_and_call_lists_skip_the_cache(cache, tmp_path, caplog, monkeypatch):
    bad, rows = _copy(cache, tmp_path)
    db = sqlite3.connect(bad / "store.db")
    db.execute("UPDATE rollout SET error = zeroblob(9 * 1024 * 1024) WHERE id = ?", (rows[0][0],))
    db.commit()
    db.close()
    with caplog.at_level(logging.WARNING), _consumer(tmp_path, bad) as store:
        assert store.get_by_cache_keys([key for _, key in rows]) == {}
    _skipped_once(caplog, bad, f"a value over {8 * 2**20} bytes")
    caplog.clear()
    bad2, rows = _copy(cache, tmp_path / "calls")
    monkeypatch.setattr(cachebounds, "MAX_CALLS", 1)  # each rollout here made several calls
    with _consumer(tmp_path / "calls", bad2) as store:
        assert store.get_by_cache_keys([key for _, key in rows]) == {}
    _skipped_once(caplog, bad2, "has over 1 model calls")
