"""The Ray executor tests' request, store and comparison."""

from __future__ import annotations

from pathlib import Path

from harnessctl.policy import Policy
from harnessctl.run.evaluate import EvalRequest
from harnessctl.store import Store
from tests.helpers.evals import eval_request

TASKS = ["dev-000", "dev-004", "dev-013", "dev-020", "dev-030", "dev-045"]
TASK_PROCESS = b"ray::run_rollout"  # the title Ray gives a worker while it runs our task


def outcomes(rows) -> dict:
    """What must not depend on where a rollout ran, by cache key."""
    return {
        r.cache_key: (r.task_id, r.seed, r.outcome, r.success, r.steps, r.model_calls,
                      r.prompt_tokens, r.completion_tokens, r.error)
        for r in rows
    }  # fmt: skip


def request(ws: Path, **kw) -> EvalRequest:
    """Six tasks x 2 seeds of the base harness with the offline policy, 2 workers."""
    return eval_request(ws, Policy("sim/dbbench"), **{"rollouts": 2, "task_ids": TASKS, **kw})


def fresh_store(path: Path) -> Store:
    path.mkdir(parents=True)
    return Store(f"sqlite:///{path / 'store.db'}", path / "trajectories")


def ancestors(pid: int, depth: int = 4) -> list[int]:
    """The parent pids of ``pid``, nearest first, up to ``depth``: a Ray worker is ours when
    our raylet (or this process, which started the cluster) is among them (another test
    process may run a cluster of its own beside ours, under ``-n``)."""
    found = []
    for _ in range(depth):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
        found.append(pid)
    return found
