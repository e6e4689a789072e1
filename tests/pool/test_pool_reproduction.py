"""Pools from reproducible rescues (issue #54): a sibling whose claimed rescues reproduce no
better than its parent tried again is marked by `profile` and left out of `export-pool`
unless asked; the manifest and the Pool API carry each sibling's reproduction."""

from __future__ import annotations

import json

import pytest

from harnessctl.evolve.reproduce import Reproduction, verdict_of
from harnessctl.pool import Pool
from harnessctl.pool.export import reproducible
from tests.helpers.cli import cli, cli_json


def summary(reproduced: int, tested: int, null: tuple[int, int]) -> dict:
    return Reproduction(
        claimed=tested,
        fresh_tested=tested,
        fresh_reproduced=reproduced,
        null_tested=null[1],
        null_reproduced=null[0],
    ).summary()


def test_the_verdict_reads_the_rate_against_the_null_baseline():
    assert summary(0, 10, (6, 10))["verdict"] == "unreproduced"  # README's 0/10 vs 6/10
    assert summary(3, 6, (3, 6))["verdict"] == "unreproduced"  # no better
    assert summary(5, 6, (3, 6))["verdict"] == "reproduced"
    assert summary(1, 4, (0, 0))["verdict"] == "reproduced"  # no null measured: above zero
    assert summary(0, 0, (0, 0))["verdict"] == "untested"
    assert verdict_of(None) is None
    old = {k: v for k, v in summary(0, 10, (6, 10)).items() if k != "verdict"}
    assert verdict_of(old) == "unreproduced"  # a summary stored before verdicts existed


def test_only_unreproduced_siblings_are_left_out_and_asking_keeps_them():
    class Spec:
        def __init__(self, name):
            self.name = name

    specs = [Spec("a"), Spec("b"), Spec("c")]
    found = {"a": summary(0, 10, (6, 10)), "b": summary(5, 6, (3, 6))}  # c: never re-tested
    kept, left = reproducible(specs, found)  # type: ignore[arg-type]
    assert [s.name for s in kept] == ["b", "c"]
    assert left == {"a": "its claimed rescues reproduce 0/10, no better than its parent tried "
                         "again (6/10)"}  # fmt: skip
    kept, left = reproducible(specs, found, include=True)  # type: ignore[arg-type]
    assert len(kept) == 3 and left == {}


@pytest.fixture(scope="module")
def world_ws(dbbench_world, tmp_path_factory):
    """A copy of the session's DBBench evolve with two siblings profiled, the first of them
    re-recorded as unreproduced (0 of 8 where its parent, tried again, solved 5)."""
    from harnessctl.workspace import load_workspace

    ws = dbbench_world.copy(tmp_path_factory.mktemp("repro") / "ws")
    siblings = sorted(v["name"] for v in dbbench_world.result["variants"] if v["round"] == 1)[:2]
    store = load_workspace(ws).open_store()
    try:
        for edit in store.edits():
            if edit.accepted and edit.child_name in siblings:
                metrics = json.loads(edit.metrics_json)
                made = siblings[0] == edit.child_name
                metrics["reproduction"] = Reproduction(
                    claimed=8, fresh_tested=8, fresh_reproduced=0 if made else 7,
                    null_tested=8, null_reproduced=5,
                ).model_dump(mode="json")  # fmt: skip
                edit.metrics_json = json.dumps(metrics)
                store.record_edit(edit)
    finally:
        store.close()
    cli(ws, "profile", "dbbench-base", *siblings, "--split", "train", "--rollouts", 2)
    return ws, siblings


def test_profile_marks_and_export_pool_leaves_out_the_unreproduced_sibling(world_ws, tmp_path):
    ws, (bad, good) = world_ws
    shown = cli(ws, "profile", "dbbench-base", bad, good, "--split", "train", "--rollouts", 2)
    said = " ".join(shown.stdout.split())
    assert "UNREPRODUCED: its claimed rescues reproduce no better than its parent" in said
    profiles = cli_json(ws, "profile", "dbbench-base", bad, good, "--split", "train",
                        "--rollouts", 2)["profiles"]  # fmt: skip
    assert profiles[bad]["harness"]["reproduction"]["verdict"] == "unreproduced"
    assert profiles[good]["harness"]["reproduction"]["verdict"] == "reproduced"
    out = tmp_path / "pool"
    result = cli_json(ws, "export-pool", "dbbench-base", bad, good, "--name", "p", "--out", out)
    assert result["harnesses"] == ["dbbench-base", good]
    assert result["left_out"] == {
        bad: "its claimed rescues reproduce 0/8, no better than its parent tried again (5/8)"
    }
    with Pool.load(out) as pool:
        assert pool.harness(good).reproduction["verdict"] == "reproduced"
        assert pool.harness("dbbench-base").reproduction is None
    said = cli(ws, "export-pool", "dbbench-base", bad, good, "--name", "p", "--out", tmp_path / "q")
    assert f"left out {bad}: its claimed rescues reproduce 0/8" in " ".join(said.stdout.split())


def test_asking_keeps_the_unreproduced_sibling_marked_in_the_manifest(world_ws, tmp_path):
    ws, (bad, good) = world_ws
    out = tmp_path / "pool"
    result = cli_json(ws, "export-pool", "dbbench-base", bad, good, "--name", "p", "--out", out,
                      "--include-unreproduced")  # fmt: skip
    assert sorted(result["harnesses"]) == sorted(["dbbench-base", bad, good])
    assert result["left_out"] == {}
    entries = {h["name"]: h for h in json.loads((out / "pool.json").read_text())["harnesses"]}
    assert entries[bad]["reproduction"]["verdict"] == "unreproduced"
    # a pool of nothing but the base is refused, naming why and the flag
    alone = cli(ws, "export-pool", "dbbench-base", bad, "--name", "p", "--out", tmp_path / "x",
                code=2)  # fmt: skip
    assert "no sibling left for the pool" in alone.output
    assert "--include-unreproduced" in alone.output
