"""A Ray node lost mid-run: a real two-node cluster on this machine (``ray.cluster_utils``),
the worker node removed (its raylet and workers killed) while it runs rollouts. The run
completes on the head node; every finished rollout is kept, none is stored twice.

Skips without Ray, except under ``CI``, where it fails (see test_ray_executor.py).
"""

from __future__ import annotations

import threading
import time

import pytest
from test_ray_executor import TASKS, _unavailable, fresh_store, outcomes, request

from harnessctl.evaluate import evaluate
from harnessctl.store import Store


@pytest.fixture(scope="module")
def two_nodes():
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError:
        _unavailable("ray is not installed (pip install -e '.[test]' installs it)")
    if ray.is_initialized():
        ray.shutdown()
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
        runtime_env={"env_vars": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}},
    )
    cluster.wait_for_nodes()
    yield cluster, worker
    ray.shutdown()
    cluster.shutdown()


def test_a_node_lost_mid_run_loses_no_finished_rollout(two_nodes, workspace, tmp_path):
    cluster, worker = two_nodes
    reference = evaluate(request(workspace), fresh_store(tmp_path / "local"))
    store: Store = fresh_store(tmp_path / "ray")
    removed = threading.Event()

    def remove_the_worker_node() -> None:
        while len(store.rollouts()) < 3:
            time.sleep(0.02)
        cluster.remove_node(worker)  # its raylet and worker processes are killed
        removed.set()

    killer = threading.Thread(target=remove_the_worker_node, daemon=True)
    killer.start()
    result = evaluate(request(workspace, executor="ray"), store)
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
