"""Error control beyond one run (harnessctl/evolve/history.py): a workspace's earlier evolve
runs on the same base, suite and split are counted from the store, a resumed run keeps its
place, and under the workspace scope the runs' shares of alpha sum to at most one."""

from __future__ import annotations

import json
import math

import pytest

from harnessctl.evolve.history import run_share, workspace_history
from harnessctl.store import EditRow, Store


@pytest.fixture
def store(tmp_path):
    db = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "trajectories")
    yield db
    db.close()


def edit(store, evolve_id, n, *, status="evaluated", accepted=False, split="train", base="B",
         at=0.0, rnd=1, suite="s@1", recorded_base=True):  # fmt: skip
    metrics = {"split": split, "suite": suite}
    if recorded_base:
        metrics["base_hash"] = base
    store.record_edit(
        EditRow(
            id=f"{evolve_id}{n}", edit_key=f"{evolve_id}:{n}", evolve_id=evolve_id,
            parent_hash=base if rnd == 1 else "child", parent_name="b", direction="d",
            round=rnd, attempt=0, editor="rules", prompt="", response="", status=status,
            accepted=accepted, created_at=at, metrics_json=json.dumps(metrics),
        )
    )  # fmt: skip


def test_earlier_runs_on_the_same_base_and_split_are_counted_in_order(store):
    edit(store, "r1", 1, accepted=True, status="accepted", at=1)
    edit(store, "r1", 2, at=2, rnd=2)
    edit(store, "r1", 3, status="rejected", at=3)  # never judged
    edit(store, "r2", 1, at=10, recorded_base=False)  # older record: its round-1 parent
    edit(store, "other-split", 1, split="test", accepted=True, status="accepted", at=5)
    edit(store, "other-base", 1, base="C", accepted=True, status="accepted", at=6)
    edit(store, "other-suite", 1, suite="s@2", at=7)
    new = workspace_history(store, base_hash="B", suite="s@1", split="train", evolve_id="r3")
    assert new.position == 3 and new.earlier_runs == ["r1", "r2"]
    assert (new.judgements, new.accepted) == (3, 1)
    assert new.share == 1.0 and new.accepted_before == 0  # scope "run": shown, not controlled
    assert "3 earlier judgements on this base and split in 2 runs (1 accepted)" in new.text()
    # a resumed run keeps its place: r1 is still the first, r2 the second
    again = workspace_history(store, base_hash="B", suite="s@1", split="train", evolve_id="r2")
    assert again.position == 2 and again.earlier_runs == ["r1"]
    first = workspace_history(store, base_hash="B", suite="s@1", split="train", evolve_id="r1")
    assert first.position == 1 and "the first evolve run" in first.text()


def test_the_workspace_scope_controls_every_run_together(store):
    edit(store, "r1", 1, accepted=True, status="accepted", at=1)
    shared = workspace_history(
        store, base_hash="B", suite="s@1", split="train", evolve_id="r2", scope="workspace"
    )
    assert shared.share == pytest.approx(run_share(2)) and shared.accepted_before == 1
    assert "controlled together with them" in shared.text()
    assert sum(run_share(j) for j in range(1, 100_000)) <= 1.0
    assert run_share(1) == pytest.approx(6 / math.pi**2)
    with pytest.raises(ValueError):
        workspace_history(store, base_hash="B", suite="s@1", split="train", evolve_id="x",
                          scope="everything")  # fmt: skip
