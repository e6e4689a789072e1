"""Executors are chosen by name through the registry, built-ins exactly like a plugin."""

from __future__ import annotations

import pytest

from harnessctl.errors import ConfigError
from harnessctl.harness import load_harness
from harnessctl.policy import Policy
from harnessctl.run.evaluate import EvalRequest, evaluate
from harnessctl.run.executor import EXECUTORS
from harnessctl.run.record import Recorder
from harnessctl.suite import load_suite
from harnessctl.workspace import load_workspace


class NoWhereRunner(Recorder):
    """Runs nothing: every rollout fails on infrastructure, and the jobs are kept."""

    seen: list = []

    def run_all(self, pending, progress, done, total):
        for job in pending:
            NoWhereRunner.seen.append(job)
            yield job.cache_key, None


def test_builtins_resolve_by_name_and_an_unknown_one_is_named():
    assert {"local", "ray"} <= set(EXECUTORS.names())
    assert issubclass(EXECUTORS.get("local"), Recorder)
    assert issubclass(EXECUTORS.get("ray"), Recorder)  # without importing Ray itself
    with pytest.raises(ConfigError, match="unknown executor 'slurm'") as info:
        EXECUTORS.get("slurm")
    assert info.value.where == "--executor"


def test_a_registered_executor_runs_the_pending_rollouts(workspace):
    EXECUTORS.register("nowhere", NoWhereRunner)
    try:
        request = EvalRequest(
            harness=load_harness(workspace / "harnesses" / "dbbench-base"),
            suite=load_suite(workspace / "examples" / "dbbench"),
            split="dev",
            policy=Policy("sim/dbbench"),
            rollouts=2,
            task_ids=["dev-000"],
            executor="nowhere",
        )
        result = evaluate(request, load_workspace(workspace).open_store())
    finally:
        EXECUTORS.unregister("nowhere")
    assert [job.seed for job in NoWhereRunner.seen] == [0, 1]
    assert len(result.infra_failed) == 2 and result.rows == []
