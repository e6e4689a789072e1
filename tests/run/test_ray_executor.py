"""`--executor ray` on a real local Ray cluster (2 CPUs): an eval and an evolve round give the
same results as the local executor for the same seeds; a Ray worker killed mid-run loses and
duplicates nothing; the docker sandbox runs under it too.

Ray is installed with the test extra; without it these tests skip, except under CI (``CI``
set), where they fail: CI must exercise the distributed path.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessctl.cli import app
from harnessctl.harness import load_harness
from harnessctl.policy import Policy
from harnessctl.run.evaluate import evaluate
from harnessctl.store import Store
from harnessctl.suite import load_suite
from harnessctl.workspace import init_workspace, load_workspace
from tests.helpers.ci import unavailable
from tests.helpers.ray import TASK_PROCESS, TASKS, ancestors, fresh_store, outcomes, request

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of 2 CPUs, shared by this module's tests."""
    try:
        import ray
    except ImportError:
        unavailable(
            "the Ray executor tests",
            "ray is not installed (pip install -e '.[test]' installs it)",
        )
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024 * 1024,
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory):
    """The same evaluation on the local executor, in a store of its own."""
    root = tmp_path_factory.mktemp("local")
    ws = root / "ws"
    init_workspace(ws)
    store = fresh_store(root / "store")
    result = evaluate(request(ws), store)
    assert not result.infra_failed
    return outcomes(result.rows)


def test_eval_through_ray_matches_the_local_executor(
    ray_cluster, local_reference, workspace, tmp_path
):
    store = fresh_store(tmp_path / "store")
    result = evaluate(request(workspace, executor="ray"), store)
    assert result.executed == len(TASKS) * 2 and not result.infra_failed
    assert outcomes(result.rows) == local_reference
    assert outcomes(store.rollouts()) == local_reference
    # every rollout's trajectory and model calls came back from the node into the store
    for row in store.rollouts():
        trajectory = store.trajectory(row)
        assert trajectory.task_id == row.task_id
        assert len(trajectory.calls) == row.model_calls == len(store.calls(row.id))
    assert store.attempts() == []
    # the cache is shared with the local executor: a re-run executes nothing
    again = evaluate(request(workspace, executor="ray"), store)
    assert again.executed == 0 and again.cached == len(TASKS) * 2


def _kill_one_running_task(after: int, store: Store, killed: list[int], stop: threading.Event):
    """Once ``after`` rollouts are stored, SIGKILL one Ray worker while it runs a rollout."""
    while not stop.is_set() and len(store.rollouts()) < after:
        time.sleep(0.02)
    while not stop.is_set() and not killed:
        for proc in Path("/proc").iterdir():
            try:
                if (
                    proc.name.isdigit()
                    and (proc / "cmdline").read_bytes().startswith(TASK_PROCESS)
                    and os.getpid() in ancestors(int(proc.name), depth=6)  # our cluster's
                ):
                    os.kill(int(proc.name), signal.SIGKILL)
                    killed.append(int(proc.name))
                    return
            except OSError:
                continue
        time.sleep(0.01)


def test_a_killed_ray_worker_loses_and_duplicates_nothing(
    ray_cluster, local_reference, workspace, tmp_path
):
    store = fresh_store(tmp_path / "store")
    killed: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_one_running_task, args=(3, store, killed, stop))
    killer.start()
    try:
        result = evaluate(request(workspace, executor="ray"), store)
    finally:
        stop.set()
        killer.join()
    assert killed, "no Ray worker was caught running a rollout"
    # the run completed: every rollout recorded exactly once, with the local executor's result
    assert not result.infra_failed
    keys = [r.cache_key for r in store.rollouts()]
    assert len(keys) == len(set(keys)) == len(TASKS) * 2
    assert outcomes(store.rollouts()) == local_reference
    # the lost task is an infrastructure attempt, retried, never a task failure
    attempts = store.attempts()
    assert len(attempts) == 1 and attempts[0].outcome == "infra_error"
    assert "Worker" in attempts[0].error or "worker" in attempts[0].error
    retried = next(r for r in store.rollouts() if r.cache_key == attempts[0].cache_key)
    assert retried.attempts == 2


def test_the_nodes_build_the_suites_environment_with_its_env_options(
    ray_cluster, workspace, tmp_path
):
    """A suite's env_options (here the v0.2 comparison rules) reach the nodes: they build the
    same environment as the driver, so the runtime versions agree and the trajectories say
    which rules scored them."""
    import shutil

    import yaml

    suite_dir = tmp_path / "suite"
    shutil.copytree(workspace / "examples" / "dbbench", suite_dir)
    config = yaml.safe_load((suite_dir / "suite.yaml").read_text(encoding="utf-8"))
    (suite_dir / "suite.yaml").write_text(
        yaml.safe_dump({**config, "env_options": {"rules": "v0.2"}}), encoding="utf-8"
    )
    store = fresh_store(tmp_path / "store")
    suite = load_suite(suite_dir)
    kw = {"rollouts": 1, "task_ids": TASKS[:2], "suite": suite}
    local = evaluate(request(workspace, **kw), store)
    ray_store = fresh_store(tmp_path / "ray-store")
    result = evaluate(request(workspace, executor="ray", **kw), ray_store)
    assert not result.infra_failed and result.executed == 2
    assert outcomes(result.rows) == outcomes(local.rows)
    scores = [ray_store.trajectory(row).score for row in ray_store.rollouts()]
    assert scores and all(s is not None and s.detail["rules"] == "v0.2" for s in scores)


def test_a_configuration_error_on_the_node_is_raised_not_retried(ray_cluster, workspace, tmp_path):
    store = fresh_store(tmp_path / "store")
    bad = request(workspace, executor="ray", sandbox="no-such-backend", task_ids=TASKS[:1])
    with pytest.raises(Exception, match="no-such-backend"):
        evaluate(replace(bad, rollouts=1), store)
    assert store.rollouts() == [] and store.attempts() == []


def test_ray_runs_the_docker_sandbox_on_its_nodes(
    ray_cluster,
    local_reference,
    docker_engine,  # noqa: F811
    workspace,
    tmp_path,
):
    store = fresh_store(tmp_path / "store")
    result = evaluate(request(workspace, executor="ray", sandbox="docker"), store)
    assert not result.infra_failed
    assert outcomes(result.rows) == local_reference
    isolation = json.loads(result.rows[0].isolation_json)
    assert isolation.get("backend") == "docker"


EVOLVE = [
    "evolve", "dbbench-base", "--split", "train", "--rounds", "1", "--rollouts", "1",
    "--directions", "context-construction,execution-recovery", "--batch", "8", "--control", "8",
    "--alpha", "0.25", "--workers", "2", "--json",
]  # fmt: skip


def evolve_state(ws: Path, executor: str, monkeypatch) -> dict:
    init_workspace(ws)
    monkeypatch.setenv("HARNESSCTL_WORKSPACE", str(ws))
    result = CliRunner().invoke(app, [*EVOLVE, "--executor", executor])
    assert result.exit_code == 0, result.output
    store = load_workspace(ws).open_store()
    return {
        "rollouts": outcomes(store.rollouts()),
        "edits": sorted(
            (e.direction, e.status, e.rescues, e.regressions, e.child_hash) for e in store.edits()
        ),
        "harnesses": sorted(p.name for p in (ws / "harnesses").iterdir()),
    }


def test_an_evolve_round_through_ray_matches_the_local_executor(ray_cluster, tmp_path, monkeypatch):
    local = evolve_state(tmp_path / "local", "local", monkeypatch)
    distributed = evolve_state(tmp_path / "ray", "ray", monkeypatch)
    assert any(status == "accepted" for _, status, *_ in local["edits"])
    assert len(local["harnesses"]) > 1
    assert distributed == local


# --- the node side, without Ray ---


def test_a_node_writes_each_harness_once_and_checks_its_hash(workspace, monkeypatch, tmp_path):
    from harnessctl.run import node

    monkeypatch.setattr(node, "_harnesses", {})
    monkeypatch.setattr(node.tempfile, "tempdir", str(tmp_path))
    spec = load_harness(workspace / "harnesses" / "dbbench-base")
    bundle = node.HarnessBundle.of(spec)
    copy = node._materialise(bundle)
    assert copy.hash == spec.hash and copy.path != spec.path
    assert copy.path.parent.parent == tmp_path / f"harnessctl-node-{os.getuid()}"
    node._harnesses.clear()
    assert node._materialise(bundle).path == copy.path  # reused by the next worker process

    forged = replace(bundle, hash="0" * 64)
    with pytest.raises(Exception, match="cannot materialise"):
        node._materialise(forged)
    escaping = replace(bundle, hash="1" * 64, files=(("../evil.py", False, b"x"),))
    with pytest.raises(Exception, match="bad path"):
        node._materialise(escaping)


def test_a_node_with_another_runtime_version_refuses_the_task(workspace):
    from harnessctl.errors import ConfigError
    from harnessctl.run import node

    spec = load_harness(workspace / "harnesses" / "dbbench-base")
    task = load_suite(workspace / "examples" / "dbbench").tasks("dev").tasks[0]
    job = node.NodeJob("dbbench", {}, {}, task, 0, Policy("sim/dbbench"), runtime="0+other")
    with pytest.raises(ConfigError, match="same harnessctl version"):
        node.run_rollout(job, node.HarnessBundle.of(spec))


def test_an_unknown_executor_is_a_usage_error_before_anything_runs(workspace):
    result = CliRunner().invoke(app, ["eval", "dbbench-base", "--executor", "slurm"])
    assert result.exit_code == 2
    assert "--executor" in result.output and "unknown executor 'slurm'" in result.output
    assert load_workspace(workspace).open_store().rollouts() == []


def test_a_ray_address_nobody_answers_at_fails_fast_and_marks_the_run_failed(workspace):
    started = time.monotonic()
    cli = ["eval", "dbbench-base", "--executor", "ray", "--ray-address", "127.0.0.1:1"]
    result = CliRunner().invoke(app, [*cli, "--task", "dev-000", "--rollouts", "1"])
    assert result.exit_code == 2, result.output
    assert "--ray-address" in result.output and "no Ray cluster answers" in result.output
    assert time.monotonic() - started < 30
    assert load_workspace(workspace).open_store().rollouts() == []
    with sqlite3.connect(workspace / ".harnessctl" / "store.db") as db:
        assert db.execute("SELECT status FROM run").fetchall() == [("failed",)]
