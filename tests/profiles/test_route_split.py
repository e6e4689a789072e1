"""Issue #56 end to end: the session's small pool profiled on train and then on test (the
newest), as the user had it. `route` and `eval --router` read the same profiles by default,
`route --split` reads the split it names and both say what they read; pools of the train and
of the test profiles have different ids."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harnessctl.harness import load_harness
from harnessctl.suite import load_suite
from harnessctl.workspace import load_workspace
from tests.helpers.pools import cli

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")

BASE = "dbbench-base"


@pytest.fixture(scope="module")
def ws(small_pool, tmp_path_factory) -> tuple[Path, list[str]]:
    """A copy of the small pool's workspace, its harnesses profiled on test too."""
    src, _, names = small_pool
    ws = tmp_path_factory.mktemp("route-split") / "ws"
    shutil.copytree(src, ws, symlinks=True)
    cli(ws, "profile", *names, "--split", "test", "--rollouts", 1)
    return ws, names


def run_json(ws: Path, *args) -> dict:
    out = cli(ws, *args, "--json").stdout
    return json.loads(out[out.index("{") :])


def failures(ws: Path, split: str) -> tuple[str, str]:
    """A task of ``split`` the base failed, and its failed rollouts' ids."""
    store = load_workspace(ws).open_store()
    base = load_harness(ws / "harnesses" / BASE)
    failed = [r for r in store.rollouts(harness_hash=base.hash, split=split) if not r.success]
    assert failed, f"the base failed no {split} task"
    task = failed[0].task_id
    return task, ",".join(r.id[:12] for r in failed if r.task_id == task)


def first_task(ws: Path, split: str) -> str:
    return load_suite(ws / "examples" / "dbbench").tasks(split).tasks[0].id


def test_route_and_eval_router_read_the_same_profiles_by_default(ws) -> None:
    root, names = ws
    siblings = sorted(n for n in names if n != BASE)
    # a test failure routed; the routed eval on its default split (dev): both read train,
    # the split every candidate has other than the routed tasks' (route read the newest,
    # test, and eval --router train, before)
    task, ids = failures(root, "test")
    routed = run_json(root, "route", "--task", task, "--failures", ids, "--k", 2)
    assert routed["version"] == 3 and routed["evidence"]["split"] == "train"
    assert routed["evidence"]["harnesses"] == siblings and not routed["evidence"]["asked"]
    assert set(routed["profile_splits"].values()) == {"train"}
    pool = ("--router", ",".join(siblings))  # the candidates `route` finds: the profiled
    one = ("--rollouts", 1, *pool, "--task", first_task(root, "dev"))
    evaluated = run_json(root, "eval", BASE, *one)
    assert evaluated["profile_splits"] == routed["profile_splits"]
    # tasks of train routed: both read test, the other split every candidate has
    task, ids = failures(root, "train")
    routed = run_json(root, "route", "--task", task, "--failures", ids)
    one = ("--split", "train", "--rollouts", 1, *pool, "--task", task)
    evaluated = run_json(root, "eval", BASE, *one)
    assert set(routed["profile_splits"].values()) == {"test"} == {routed["evidence"]["split"]}
    assert evaluated["profile_splits"] == routed["profile_splits"]
    shown = " ".join(cli(root, "eval", BASE, *one).stdout.split())  # unwrapped
    assert "profiles read: dbbench-dev/test under sim/dbbench, of " in shown


def test_route_split_reads_the_split_it_names_and_says_so(ws) -> None:
    root, names = ws
    siblings = sorted(n for n in names if n != BASE)
    task, ids = failures(root, "test")
    routed = run_json(root, "route", "--task", task, "--failures", ids, "--split", "test")
    assert routed["evidence"]["split"] == "test" and routed["evidence"]["asked"]
    assert set(routed["profile_splits"].values()) == {"test"}
    assert routed["in_sample"]  # the test profiles ran this task: said, not hidden
    shown = cli(root, "route", "--task", task, "--failures", ids, "--split", "test").stdout
    assert (
        f"profiles read: dbbench-dev/test under sim/dbbench, of {', '.join(siblings)} "
        "(named by --split)"
    ) in " ".join(shown.split())  # unwrapped
    assert "IN-SAMPLE" in shown
    bad = cli(root, "route", "--task", task, "--failures", ids, "--split", "nope", ok=False)
    assert bad.returncode == 2
    assert "no candidate harness has a profile on dbbench-dev/nope" in bad.stderr


def test_pools_of_train_and_test_profiles_have_different_ids(ws, tmp_path) -> None:
    root, names = ws
    ids = {}
    for split, name in (("train", "a"), ("test", "b"), ("train", "c")):
        out = run_json(
            root, "export-pool", *names, "--split", split, "--out", tmp_path / name,
            "--include-unreproduced",
        )  # fmt: skip
        assert set(out["profile_splits"].values()) == {split}
        ids[name] = out["pool_id"]
    assert ids["a"] != ids["b"] and ids["a"] == ids["c"], ids
    verified = run_json(root, "pool", "verify", tmp_path / "b")
    assert verified["ok"] and verified["pool_id"] == ids["b"]
