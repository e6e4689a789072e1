"""Which rollouts of a request the store does not hold yet: what a command will run (and
pay for) before it runs, for the cost estimate said before the first rollout."""

from __future__ import annotations

from .evaluate import EvalRequest, planned_jobs


def pending_rollouts(request: EvalRequest, store) -> int:
    """How many rollouts of ``request`` are not in ``store``: the jobs
    :func:`harnessctl.run.evaluate.evaluate` builds (:func:`planned_jobs`), counted as it
    counts its pending jobs."""
    tasks = request.suite.tasks(request.split).tasks
    if request.task_ids:
        wanted = set(request.task_ids)
        tasks = [t for t in tasks if t.id in wanted]
    keys = [job.cache_key for job in planned_jobs(request, tasks)]
    found = store.get_by_cache_keys(keys)
    return sum(1 for k in keys if k not in found)
