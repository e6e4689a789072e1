"""ALFWorld through every stage, as a user runs it: ``harnessctl evolve alfworld-base`` on the
offline defaults (sim/alfworld, the rule-based editor), replay/alfworld winning every game
with the base and every accepted sibling on both sandbox backends, then profile, route and
the Rank-1 routed eval, export-pool and the Pool API's rescue, ``test`` and ``report``.

One workspace per module, evolved once (train split, 2 seeds); the later stages reuse its
cached rollouts (profiles are in-sample on train, as the toy's are), so the file stays
within CI's time."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from harnessctl.workspace import load_workspace
from tests.helpers import ROOT
from tests.helpers.ci import unavailable
from tests.helpers.cli import cli, cli_json
from tests.helpers.workspaces import isolated_workspace

# the module fixture runs a whole evolve over the games (about 3.5 min on a quiet 2-core
# machine): the first test pays for it, so its limit is wider than the suite default
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

try:
    import alfworld  # noqa: F401  (the `alfworld` extra; .ci/run installs it)
except ImportError:  # CI must run these: it fails there instead of skipping
    if os.environ.get("CI"):
        raise
    pytest.skip("pip install -e '.[alfworld]' to run these", allow_module_level=True)

SUITE = "examples/alfworld"
BASE = "alfworld-base"
GAMES = 36


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A fresh workspace as `harnessctl init` makes it (the bundled harnesses and example
    suites), using the local sandbox and 2 workers; the policy is left to the default."""
    root = tmp_path_factory.mktemp("alfworld") / "ws"
    with isolated_workspace(tmp_path_factory.mktemp("home"), root, workers=2):
        yield root


@pytest.fixture(scope="module")
def evolved(ws):
    """The README's command: `harnessctl evolve alfworld-base --suite examples/alfworld`."""
    return cli_json(
        ws, "evolve", BASE, "--suite", SUITE, "--gate", "same-batch"
    )  # CI time: see docs/decisions.md


@pytest.fixture(scope="module")
def siblings(evolved) -> list[str]:
    return sorted(v["name"] for v in evolved["best"].values())


@pytest.fixture(scope="module")
def profiled(ws, evolved, siblings):
    return cli_json(ws, "profile", BASE, *siblings, "--suite", SUITE)


def store(ws):
    return load_workspace(ws).open_store()


def _replay(ws, name: str, *extra) -> dict:
    args = ["eval", name, "--suite", SUITE, "--split", "dev", "--rollouts", 1, *extra]
    return cli_json(ws, *args, "--policy", "replay/alfworld")["summary"]


def test_evolve_on_the_defaults_grows_complementary_siblings(ws, evolved):
    accepted = {d: v for d, v in evolved["best"].items()}
    assert len(accepted) >= 3, evolved["edits"]
    for direction, variant in accepted.items():
        assert variant["name"] == f"{BASE}.{direction}.r1"
        assert variant["rescues"] > 0 and variant["regressions"] == 0
        assert (ws / "harnesses" / variant["name"] / "harness.yaml").is_file()
    largest = max(v["rescues"] for v in accepted.values())
    assert evolved["union_rescues"] > largest, evolved
    # the base's failures are the sim's four modes, each with its own outcome or cause
    base = cli_json(ws, "eval", BASE, "--suite", SUITE, "--split", "train", "--rollouts", 2)
    assert base["cached"] == 2 * GAMES // 2  # evolve's parent rollouts, served from the store
    assert {"success", "invalid_format", "tool_error", "step_limit"} <= set(
        base["summary"]["outcomes"]
    )


def test_replay_wins_every_game_with_the_base_and_every_sibling_locally(ws, siblings):
    for name in [BASE, *siblings]:
        summary = _replay(ws, name)
        assert summary["outcomes"] == {"success": GAMES}, (name, summary)
    rows = store(ws).rollouts(policy_id="replay/alfworld")
    trajectory = store(ws).trajectory(rows[0])
    kinds = [s.kind for s in trajectory.steps]
    assert kinds[0] == "reset" and set(kinds[1:]) == {"step"}
    assert trajectory.score.detail["won"] is True


def test_a_shuffled_or_empty_walkthrough_does_not_win_through_the_rollout_path(ws, monkeypatch):
    from harnessctl.envs.alfworld import AlfworldEnvironment

    real = AlfworldEnvironment.replay
    games = [t.id for t in AlfworldEnvironment().load_tasks(ws / SUITE / "games").tasks[::12]]
    flags = [x for g in games for x in ("--task", g)]
    for name, script in (
        ("rotated", lambda self, task: real(self, task)[1:] + real(self, task)[:1]),
        ("empty", lambda self, task: []),
    ):
        monkeypatch.setattr(AlfworldEnvironment, "replay", script)
        other = f"sqlite:///{ws.parent / f'{name}.db'}"  # the script is not in the cache key
        summary = _replay(ws, BASE, *flags, "--store", other)
        assert summary["rollouts"] == len(games) and "success" not in summary["outcomes"], (
            name,
            summary,
        )


def test_replay_wins_every_game_on_docker_too(ws, siblings):
    from harnessctl.errors import HarnessctlError
    from harnessctl.sandbox.docker import connect

    try:
        connect().close()
    except HarnessctlError as exc:
        unavailable("ALFWorld on docker", f"no docker engine: {exc}")
    build = ROOT / "scripts" / "build-runtime-image.sh"
    done = subprocess.run([str(build)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        unavailable("ALFWorld on docker", f"no runtime image: {done.stderr[-500:]}")
    other = f"sqlite:///{ws.parent / 'docker.db'}"  # a store of its own: nothing cached
    for name in [BASE, *siblings]:
        summary = _replay(ws, name, "--sandbox", "docker", "--store", other)
        assert summary["outcomes"] == {"success": GAMES}, (name, summary)
    rows = load_workspace(ws).open_store(other).rollouts()
    assert {json.loads(r.isolation_json)["backend"] for r in rows} == {"docker"}


def test_profile_route_and_the_rank1_routed_eval(ws, profiled, siblings):
    profiles = profiled["profiles"]
    # every sibling passed the gate on fresh seeds; most also rescue on the profiled seeds
    improved = [n for n in siblings if profiles[n]["rescue"]["tasks"]]
    assert len(improved) >= 2, {n: profiles[n]["rescue"] for n in siblings}
    for name in improved:
        assert profiles[name]["success"]["rate"] > profiles[BASE]["success"]["rate"]
    failed = [r for r in store(ws).rollouts(harness_hash=_hash(ws, BASE)) if not r.success]
    repairs = {
        "invalid_format": f"{BASE}.format-validation.r1",
        "tool_error": f"{BASE}.action-validation.r1",
    }
    for outcome, best in repairs.items():
        if best not in siblings:
            continue
        row = next(r for r in failed if r.outcome == outcome)
        args = ["--task", row.task_id, "--failures", row.id, "--k", 2]
        ranked = cli_json(ws, "route", *args)
        assert ranked["top"][0]["name"] == best, ranked
    pool = ",".join(siblings)
    args = ["eval", BASE, "--suite", SUITE, "--split", "train", "--rollouts", 2]
    routed = cli_json(ws, *args, "--router", pool, "--route-when", "failed")
    assert routed["routed"]["success_rate"] > routed["base"]["success_rate"], routed
    assert routed["routed_tasks"] > 0 and set(routed["chosen_counts"]) <= set(siblings)


def test_export_pool_and_the_pool_api_rescue(ws, profiled, siblings):
    from harnessctl.policy import Policy
    from harnessctl.pool import Pool, rescue_group
    from harnessctl.suite import load_suite

    out = ws.parent / "pools" / "alfworld-pool"
    cli(
        ws, "export-pool", "--name", "alfworld-pool", "--out", out, "--base", BASE, "--suite",
        SUITE, "--include-unreproduced",  # every sibling, reproduced or not (#54)
    )  # fmt: skip
    assert "all checksums match" in cli(ws, "pool", "verify", out).stdout
    manifest = json.loads((out / "pool.json").read_text())
    assert {h["env"] for h in manifest["harnesses"]} == {"alfworld"}
    failed = next(
        r for r in store(ws).rollouts(harness_hash=_hash(ws, BASE)) if r.outcome == "invalid_format"
    )
    task = load_suite(ws / SUITE).all_tasks.by_id()[failed.task_id]
    with Pool.load(out) as pool:
        assert sorted(pool.names) == sorted([BASE, *siblings])
        session = pool.session()  # the environment's budgets, as eval uses them
        assert (session.budgets.max_calls, session.budgets.max_tokens) == (60, 400_000)
        sim = Policy("sim/alfworld")
        group = [pool.base.rollout(task, sim, seed=failed.seed)]
        assert not group[0].success and group[0].outcome == "invalid_format"
        result = rescue_group(pool, task, group, sim, k=2, seed=failed.seed)
        assert result.replaced and any(r.success for r in result.group), result.reason
        assert f"{BASE}.format-validation.r1" in result.routed


def test_harnessctl_test_and_report_cover_the_siblings(ws, profiled, siblings):
    assert "0 failed" in cli(ws, "test", "--suite", SUITE, "--split", "train").stdout
    out = ws / "out" / "report.html"
    data = cli_json(ws, "report", "--suite", SUITE, "--out", out, "--split", "train")
    assert set(data["harnesses"]) == {BASE, *siblings} and data["suite"] == "alfworld"
    html = out.read_text()
    assert "sim/alfworld" in html and all(name in html for name in siblings)


def _hash(ws, name: str) -> str:
    from harnessctl.harness import load_harness

    return load_harness(ws / "harnesses" / name).hash
