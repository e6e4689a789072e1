"""Which rollouts of a request the store does not hold yet: what a command will run (and
pay for) before it runs, for the cost estimate said before the first rollout."""

from __future__ import annotations

from dataclasses import replace

from ..harness import rollout_version
from .evaluate import EvalRequest, request_inputs


def pending_rollouts(request: EvalRequest, store) -> int:
    """How many rollouts of ``request`` are not in ``store``: the (task, seed) jobs and cache
    keys :func:`harnessctl.run.evaluate.evaluate` builds, from the same ``request_inputs``,
    counted as it counts its pending jobs."""
    tasks = request.suite.tasks(request.split).tasks
    if request.task_ids:
        wanted = set(request.task_ids)
        tasks = [t for t in tasks if t.id in wanted]
    if request.pairs is not None:
        by_id = {t.id: t for t in tasks}
        chosen = [(by_id[t], s) for t, s in request.pairs if t in by_id]
    else:
        seeds = range(request.seed, request.seed + request.rollouts)
        chosen = [(t, s) for t in tasks for s in seeds]
    runtime = rollout_version(request.suite.environment, request.policy.model)
    inputs = request_inputs(request, runtime=runtime)
    keys = [replace(inputs, task_hash=t.content_hash, seed=s).key() for t, s in chosen]
    found = store.get_by_cache_keys(keys)
    return sum(1 for k in keys if k not in found)
