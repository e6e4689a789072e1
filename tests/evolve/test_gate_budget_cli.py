"""`evolve` says what its budget buys before its first edit and refuses one that detects
nothing (issue #54); the workspace's earlier runs on the same base and split are counted."""

from __future__ import annotations

import pytest

from harnessctl.workspace import init_workspace
from tests.helpers.pools import cli

pytestmark = pytest.mark.slow  # the base's evaluation (read through the session's world)


def test_a_budget_that_detects_nothing_is_refused_after_saying_so(dbbench_world, tmp_path):
    ws = tmp_path / "ws"
    init_workspace(ws)
    args = ("evolve", "dbbench-base", "--split", "train", "--rollouts", 2, "--max-looks", 1)
    with dbbench_world.read_through():  # the base's evaluation is the world's
        refused = cli(ws, *args, "--alpha", "0.001", ok=False)
    assert refused.returncode == 2, refused.stderr[-2000:]
    said = " ".join(refused.stderr.split())
    assert "budget: 10 judgements at level 0.0001 or more, fixed design, up to 12 pairs" in said
    assert "detects no gain on the judged tasks with power 0.8" in said
    assert "pass --allow-weak-gate to run it anyway" in said
    assert "workspace: the first evolve run on this base and split" in said
    assert not list((ws / "harnesses").glob("dbbench-base.*"))  # nothing was edited


def test_the_worlds_evolve_printed_its_budget_and_its_history(dbbench_world):
    budget, history = dbbench_world.result["budget"], dbbench_world.result["history"]
    assert budget["design"] == "sequential" and budget["max_pairs"] == 360
    assert budget["detectable"] is not None and budget["detectable"] <= 0.3
    assert budget["guard_tasks"] == 40 and budget["judgements"] == 10
    assert history == {"position": 1, "earlier_runs": [], "judgements": 0, "accepted": 0,
                       "scope": "run"}  # fmt: skip
    assert dbbench_world.result["guard"].startswith("false discovery rate <= 0.1")
