"""What every executor shares: the job it runs, the progress callback, the rollout session's
options, and the registry an executor is chosen from by name.

An executor is a class built as ``Runner(request, store, run_id, runtime)`` whose
``run_all(pending, progress, done, total)`` yields ``(cache_key, row or None)`` per job, writing
each result through :class:`harnessctl.run.record.Recorder`. Built-ins are registered as import
paths, exactly as a third-party package registers one under the ``harnessctl.executors`` entry
point group; ``package.module:Class`` also works in place of a name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..envs import Task
from ..registry import Registry


@dataclass(frozen=True)
class Pending:
    task: Task
    seed: int
    cache_key: str


Progress = Callable[[str, int, int], None]  # (event, done, total)

EXECUTORS: Registry[Any] = Registry(
    "harnessctl.executors",
    "executor",
    {
        "local": "harnessctl.run.local:LocalRunner",
        "ray": "harnessctl.run.ray:RayRunner",
    },
    option="--executor",
)


def check_executor(name: str) -> None:
    """Fail before anything runs on an executor name nothing provides."""
    EXECUTORS.get(name)


def session_options(request) -> dict:
    """Keyword arguments of the ``RolloutSession`` that runs ``request``'s rollouts."""
    from ..policies import is_offline

    return {
        "sandbox": request.sandbox,
        "limits": request.limits,
        "max_calls": request.max_calls,
        "max_tokens": request.max_tokens,
        "upstream_retries": request.upstream_retries,
        "upstream_backoff_s": request.upstream_backoff_s,
        "model_timeout_s": request.model_timeout_s,
        "real_model": not is_offline(request.policy.model),
        # the suite names its container image; other backends take neither option
        "sandbox_options": (
            {"image": request.suite.image, "fresh": request.fresh_container or None}
            if request.sandbox == "docker"
            else None
        ),
    }
