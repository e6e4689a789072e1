"""MiniWoB++ through every stage after an evolve, as a user runs it: ``evolve`` on the
offline defaults (sim/miniwob, the rule-based editor) accepting siblings, then profile, route
and the Rank-1 routed eval, export-pool and the Pool API's rescue, ``test``, ``report`` and
the viewer's API.

The evolve is the session's MiniWoB++ world (train split, 2 seeds, about 100 s on a 2-core
machine; tests/helpers/miniwob_world.py), run once and copied here; later stages reuse its
cached rollouts (profiles are in-sample on train, as the other environments' e2e tests do).
The gold's replays of the base, each sim mode and its repair, and a kill -9 of an eval are in
test_miniwob_protocols.py, which needs no evolve: the other test process runs it meanwhile."""

from __future__ import annotations

import json

import pytest

from tests.envs.miniwob import require_browser
from tests.helpers.cli import cli, cli_json
from tests.helpers.miniwob_world import BASE, SUITE, TASKS, harness_hash, replay, store
from tests.helpers.workspaces import isolate

require_browser()

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def ws(miniwob_world, tmp_path_factory):
    """A copy of the session's evolved workspace (the local sandbox, 2 workers)."""
    root = miniwob_world.copy(tmp_path_factory.mktemp("miniwob") / "ws")
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, tmp_path_factory.mktemp("home"), root)
        yield root


@pytest.fixture(scope="module")
def evolved(miniwob_world):
    return miniwob_world.result


@pytest.fixture(scope="module")
def siblings(evolved) -> list[str]:
    return sorted(v["name"] for v in evolved["best"].values())


@pytest.fixture(scope="module")
def profiled(ws, evolved, siblings):
    return cli_json(ws, "profile", BASE, *siblings, "--suite", SUITE)


def test_evolve_on_the_defaults_accepts_siblings_without_regressions(ws, evolved, siblings):
    assert len(siblings) >= 2, evolved["edits"]
    for direction, variant in evolved["best"].items():
        assert variant["name"] == f"{BASE}.{direction}.r1"
        assert variant["rescues"] > 0 and variant["regressions"] == 0
    base = cli_json(ws, "eval", BASE, "--suite", SUITE, "--split", "train", "--rollouts", 2)
    assert base["cached"] > 0  # evolve's parent rollouts, served from the store
    assert {"success", "invalid_format", "tool_error", "step_limit"} <= set(
        base["summary"]["outcomes"]
    )
    for name in siblings:  # the gold still solves the suite with every sibling
        summary = replay(ws, name)["summary"]
        assert summary["outcomes"] == {"success": TASKS}, (name, summary)


def test_profile_route_and_the_rank1_routed_eval(ws, profiled, siblings):
    profiles = profiled["profiles"]
    improved = [n for n in siblings if profiles[n]["rescue"]["tasks"]]
    assert improved, {n: profiles[n]["rescue"] for n in siblings}
    for name in improved:
        assert profiles[name]["success"]["rate"] > profiles[BASE]["success"]["rate"]
    best = f"{BASE}.format-validation.r1"
    if best in siblings:
        rows = store(ws).rollouts(harness_hash=harness_hash(ws, BASE))
        failed = [r for r in rows if not r.success]
        row = next(r for r in failed if r.outcome == "invalid_format")
        ranked = cli_json(ws, "route", "--task", row.task_id, "--failures", row.id, "--k", 2)
        assert ranked["top"][0]["name"] == best, ranked
    args = ["eval", BASE, "--suite", SUITE, "--split", "train", "--rollouts", 2]
    routed = cli_json(ws, *args, "--router", ",".join(siblings), "--route-when", "failed")
    assert routed["routed"]["success_rate"] > routed["base"]["success_rate"], routed
    assert routed["routed_tasks"] > 0 and set(routed["chosen_counts"]) <= set(siblings)


def test_export_pool_and_the_pool_api_rescue(ws, profiled, siblings):
    from harnessctl.policy import Policy
    from harnessctl.pool import Pool, rescue_group
    from harnessctl.suite import load_suite

    out = ws.parent / "pools" / "miniwob-pool"
    args = ["--name", "miniwob-pool", "--out", out, "--base", BASE, "--suite", SUITE]
    exported = cli(ws, "export-pool", *args).stdout
    assert "all checksums match" in cli(ws, "pool", "verify", out).stdout
    manifest = json.loads((out / "pool.json").read_text())
    assert {h["env"] for h in manifest["harnesses"]} == {"miniwob"}
    rows = store(ws).rollouts(harness_hash=harness_hash(ws, BASE))
    failed = next(r for r in rows if r.outcome == "invalid_format")
    task = load_suite(ws / SUITE).all_tasks.by_id()[failed.task_id]
    with Pool.load(out) as pool:
        # every sibling is in the pool, or named as left out (export-pool leaves out a
        # sibling whose claimed rescues do not reproduce)
        assert BASE in pool.names and set(pool.names) <= {BASE, *siblings}
        assert all(s in pool.names or f"left out {s}:" in exported for s in siblings), exported
        assert f"{BASE}.format-validation.r1" in pool.names  # the repair the rescue below needs
        sim = Policy("sim/miniwob")
        group = [pool.base.rollout(task, sim, seed=failed.seed)]
        assert not group[0].success and group[0].outcome == "invalid_format"
        result = rescue_group(pool, task, group, sim, k=2, seed=failed.seed)
        assert result.replaced and any(r.success for r in result.group), result.reason


def test_harnessctl_test_report_and_the_viewer_cover_the_siblings(ws, profiled, siblings):
    from starlette.testclient import TestClient

    from harnessctl.view.app import create_app

    assert "0 failed" in cli(ws, "test", "--suite", SUITE, "--split", "train").stdout
    out = ws / "out" / "report.html"
    data = cli_json(ws, "report", "--suite", SUITE, "--out", out, "--split", "train")
    assert {BASE, *siblings} <= set(data["harnesses"]) and data["suite"] == "miniwob"
    html = out.read_text()
    assert "sim/miniwob" in html and all(name in html for name in siblings)
    client = TestClient(create_app(store(ws)), base_url="http://127.0.0.1:8765")
    listed = client.get("/api/rollouts", params={"outcome": "invalid_format"}).json()
    assert listed["total"] > 0
    one = client.get(f"/api/rollouts/{listed['rollouts'][0]['id']}").json()
    steps = one["trajectory"]["steps"]
    assert steps[0]["kind"] == "reset" and "Page:" in steps[0]["observation"]
