"""A Ray node lost mid-run: a real two-node cluster on this machine (``ray.cluster_utils``),
the worker node removed (its raylet and workers killed) while it runs rollouts. The run
completes on the head node; every finished rollout is kept, none is stored twice.

Skips without Ray, except under ``CI``, where it fails (see test_ray_executor.py).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from harnessctl.run.evaluate import evaluate
from harnessctl.store import Store
from tests.helpers.ci import unavailable
from tests.helpers.ray import (
    TASK_PROCESS,
    TASKS,
    fresh_store,
    outcomes,
    request,
)
from tests.helpers.ray import ancestors as _ancestors

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")


@pytest.fixture(scope="module")
def two_nodes():
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError:
        unavailable(
            "the Ray node-loss test",
            "ray is not installed (pip install -e '.[test]' installs it)",
        )
    if ray.is_initialized():
        ray.shutdown()
    from ray._raylet import AuthenticationTokenLoader

    # a token Ray read under an earlier test's HOME is cached: its GCS, a fresh process, would
    # look in this HOME for one the driver never wrote (RAY_AUTH_MODE may be token by now)
    AuthenticationTokenLoader.instance().reset_cache()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            "object_store_memory": 80 * 1024 * 1024,
        },
    )
    worker = cluster.add_node(num_cpus=1, object_store_memory=80 * 1024 * 1024)
    ray.init(
        address=cluster.address,
    )
    cluster.wait_for_nodes()
    yield cluster, worker
    ray.shutdown()
    cluster.shutdown()


def _running_a_rollout(node) -> bool:
    """Whether a worker process of ``node`` (under its raylet) is running a rollout now."""
    from ray._private import ray_constants

    raylet = node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and (proc / "cmdline").read_bytes().startswith(TASK_PROCESS)
                and raylet in _ancestors(int(proc.name))
            ):
                return True
        except OSError:
            continue
    return False


def test_a_node_lost_mid_run_loses_no_finished_rollout(two_nodes, workspace, tmp_path):
    cluster, worker = two_nodes
    reference = evaluate(request(workspace), fresh_store(tmp_path / "local"))
    store: Store = fresh_store(tmp_path / "ray")
    # warm both nodes' worker processes (other seeds: not part of the checked run)
    evaluate(request(workspace, executor="ray", seed=100, rollouts=2), fresh_store(tmp_path / "w"))
    removed, stop = threading.Event(), threading.Event()

    def remove_the_worker_node() -> None:
        # once some rollouts are stored and the worker node is running one, remove it
        while len(store.rollouts()) < 2 or not _running_a_rollout(worker):
            if stop.is_set():
                return
            time.sleep(0.01)
        cluster.remove_node(worker)  # its raylet and worker processes are killed
        removed.set()

    killer = threading.Thread(target=remove_the_worker_node, daemon=True)
    killer.start()
    try:
        result = evaluate(request(workspace, executor="ray"), store)
    finally:
        stop.set()
        killer.join(timeout=60)
    assert removed.is_set(), "the run ended before the node could be removed"
    assert not result.infra_failed
    keys = [r.cache_key for r in store.rollouts()]
    assert len(keys) == len(set(keys)) == len(TASKS) * 2
    assert outcomes(store.rollouts()) == outcomes(reference.rows)
    # what the lost node was running came back as infrastructure attempts and re-ran
    attempts = store.attempts()
    assert attempts and all(a.outcome == "infra_error" for a in attempts)
    assert all(a.error.startswith("ray") for a in attempts)
