"""``evaluate()`` requests of the library tests: the base harness on a few DBBench tasks."""

from __future__ import annotations

from harnessctl.harness import load_harness
from harnessctl.run.evaluate import EvalRequest
from harnessctl.sandbox import Limits
from harnessctl.suite import load_suite

TASKS = ["dev-000", "dev-020", "dev-045"]


def eval_request(ws, policy, **kw) -> EvalRequest:
    """The base harness of workspace ``ws`` on :data:`TASKS` of the dev split, one rollout
    each, 2 workers, a 30 s limit; ``kw`` overrides any field."""
    defaults = dict(
        harness=load_harness(ws / "harnesses" / "dbbench-base"),
        suite=load_suite(ws / "examples" / "dbbench"),
        split="dev",
        policy=policy,
        rollouts=1,
        workers=2,
        task_ids=TASKS,
        limits=Limits(timeout_s=30),
    )
    defaults.update(kw)
    return EvalRequest(**defaults)
