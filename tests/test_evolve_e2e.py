"""`harnessctl evolve` on the embedded default (rule-based editor, sim policy, train split):
distinct accepted siblings that complement each other, and kill -9 + rerun reproducing an
uninterrupted run without repeating rollouts, edits, directories or commits."""

import json
import os
import signal
import subprocess
import sys
import time

import git
import pytest

from harnessctl.workspace import init_workspace, load_workspace

ARGS = [
    "evolve",
    "dbbench-base",
    "--split",
    "train",
    "--rounds",
    "2",
    "--rollouts",
    "2",
    "--workers",
    "2",
    "--json",
]


def make_ws(path):
    init_workspace(path)
    return path


def run_evolve(ws, *extra):
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", *ARGS, *extra],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout[proc.stdout.index("{") :])


def state(ws):
    store = load_workspace(ws).open_store()
    repo = git.Repo(ws)
    return {
        "rollouts": sorted(r.cache_key for r in store.rollouts()),
        "edits": sorted((e.id, e.status, e.rescues, e.regressions) for e in store.edits()),
        "commits": [c.message.splitlines()[0] for c in repo.iter_commits()],
        "dirs": sorted(p.name for p in (ws / "harnesses").iterdir() if p.is_dir()),
        "dirty": repo.is_dirty(untracked_files=True),
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    ws = make_ws(tmp_path_factory.mktemp("reference") / "ws")
    return ws, run_evolve(ws)


def test_default_evolve_grows_complementary_siblings(reference):
    ws, result = reference
    best = result["best"]
    assert len(best) >= 3, result["edits"]
    for direction, variant in best.items():
        assert variant["rescues"] > 0, direction
        assert variant["name"] == f"dbbench-base.{direction}.r1" or ".r" in variant["name"]
    largest = max(v["rescues"] for v in best.values())
    assert result["union_rescues"] > largest  # complementarity
    s = state(ws)
    assert not s["dirty"]
    accepted = [e for e in result["edits"] if e["status"] == "accepted"]
    assert len(accepted) == len(result["variants"])
    assert sum(1 for c in s["commits"] if c.startswith("evolve: ")) == len(accepted)
    assert all(e["status"] in ("accepted", "evaluated", "rejected") for e in result["edits"])


def test_kill_9_then_rerun_matches_an_uninterrupted_run(reference, tmp_path):
    ref_ws, ref_result = reference
    ws = make_ws(tmp_path / "ws")
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harnessctl.cli", *ARGS],
        cwd=ws,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    store = load_workspace(ws).open_store()
    deadline = time.time() + 300
    while time.time() < deadline and len(store.edits()) < 3:  # killed mid-evolve
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(store.edits()) >= 3
    result = run_evolve(ws)
    assert result["best"] == ref_result["best"]
    mine, ref = state(ws), state(ref_ws)
    assert mine["edits"] == ref["edits"]
    assert mine["rollouts"] == ref["rollouts"]  # no rollout repeated or missing
    assert mine["dirs"] == ref["dirs"]
    assert sorted(mine["commits"]) == sorted(ref["commits"])
    assert not mine["dirty"]
