"""The runs in a store, and the rollouts each one stands on.

A run (``store.RunRow``) is one invocation of a command that evaluated a harness: its
selection is (harness hash, suite, split, policy). Rollouts are cache entries: a rollout row
names the run that *executed* it, and later runs with the same selection are served the same
rows. So the rollouts of a run are found by its selection, not by ``run_id``: every stored
rollout of the run's harness and policy on a task of the run's suite split. The split's task
ids come from the suite when the workspace can load it (so rows cached under another split
count), else from the rows' own ``split``. Where several rows share a (task, seed) (runs
with other budgets), the newest stands.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from .errors import HarnessctlError
from .records import Record, Result

RUNS_RESULT_VERSION = 1


class RunItem(Record):
    """One run as ``harnessctl runs`` lists it."""

    id: str
    command: str
    harness: str
    """The harness's name (its hash when the store does not know it)."""
    harness_hash: str
    suite: str
    split: str
    policy: str
    status: str
    """``running``, ``done``, ``failed``, ``interrupted`` or ``died``."""
    started_at: float
    finished_at: float | None = None
    rollouts: int
    """Rollouts in its summary; while running, those it has executed so far."""
    successes: int
    success_rate: float | None = None
    """None while running (no summary yet)."""
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class RunsResult(Result):
    """``harnessctl runs --json``: runs, newest first."""

    kind: Literal["runs"] = "runs"
    version: int = RUNS_RESULT_VERSION
    runs: list[RunItem] = Field(default_factory=list)


def list_runs(store: Any, *, limit: int | None = None, status: str | None = None) -> RunsResult:
    """The store's runs, newest first, with their counts and cost."""
    names = _harness_names(store)
    items = []
    for run in store.runs():
        if status is not None and run.status != status:
            continue
        items.append(run_item(store, run, names))
        if limit is not None and len(items) >= limit:
            break
    return RunsResult(runs=items)


def run_item(store: Any, run: Any, names: dict[str, str] | None = None) -> RunItem:
    names = names if names is not None else _harness_names(store)
    summary = json.loads(run.summary_json) if run.summary_json else None
    counts: dict[str, Any]
    if summary is not None:
        counts = {
            "rollouts": int(summary.get("rollouts", 0)),
            "successes": int(summary.get("successes", 0)),
            "success_rate": float(summary.get("success_rate", 0.0)),
            "cost_usd": float(summary.get("cost_usd", 0.0)),
            "prompt_tokens": int(summary.get("prompt_tokens", 0)),
            "completion_tokens": int(summary.get("completion_tokens", 0)),
        }
    else:  # running (or stopped before a summary): what it executed so far
        rows = store.rollouts(run_id=run.id)
        counts = {
            "rollouts": len(rows),
            "successes": sum(1 for r in rows if r.success),
            "success_rate": None,
            "cost_usd": sum(r.cost_usd for r in rows),
            "prompt_tokens": sum(r.prompt_tokens for r in rows),
            "completion_tokens": sum(r.completion_tokens for r in rows),
        }
    harness_hash = run.harness_hash or ""
    return RunItem(
        id=run.id,
        command=run.command,
        harness=names.get(harness_hash, harness_hash[:12]),
        harness_hash=harness_hash,
        suite=run.suite,
        split=run.split,
        policy=run.policy_id,
        status=run.status,
        started_at=run.started_at,
        finished_at=run.finished_at,
        **counts,
    )


def _harness_names(store: Any) -> dict[str, str]:
    return {h.hash: h.name for h in store.harnesses()}


def find_run(store: Any, ref: str) -> Any:
    """The run whose id is ``ref`` or starts with it (at least 4 characters, unique)."""
    ref = ref.strip()
    if len(ref) < 4:
        raise HarnessctlError(f"run id {ref!r}: give at least 4 characters")
    found = [r for r in store.runs() if r.id.startswith(ref)]
    if not found:
        raise HarnessctlError(f"no run with id {ref!r} (`harnessctl runs` lists them)")
    if len(found) > 1:
        raise HarnessctlError(f"run id {ref!r} is ambiguous: {len(found)} runs start with it")
    return found[0]


def latest_run(
    store: Any,
    harness: str,
    *,
    suite: str | None = None,
    split: str | None = None,
    policy: str | None = None,
) -> Any:
    """The newest finished (``done``) run of the harness named ``harness`` with the given
    selection."""
    names = _harness_names(store)
    for run in store.runs():
        if run.status != "done" or names.get(run.harness_hash or "") != harness:
            continue
        if suite and run.suite != suite:
            continue
        if split and run.split != split:
            continue
        if policy and run.policy_id != policy:
            continue
        return run
    wanted = ", ".join(
        f"{k} {v}" for k, v in (("suite", suite), ("split", split), ("policy", policy)) if v
    )
    raise HarnessctlError(
        f"no finished run of harness {harness!r}"
        + (f" with {wanted}" if wanted else "")
        + " (`harnessctl runs` lists the runs; `harnessctl eval` makes one)"
    )


def run_rollouts(store: Any, run: Any, task_ids: set[str] | None = None) -> dict:
    """``(task id, seed) -> rollout row`` for the rollouts the run stands on (module
    docstring): ``task_ids`` are its split's tasks when known."""
    rows = store.rollouts(harness_hash=run.harness_hash, policy_id=run.policy_id)
    chosen: dict[tuple[str, int], Any] = {}
    for row in rows:  # oldest first: a newer row for the same pair replaces an older one
        if row.suite and run.suite and row.suite != run.suite:
            continue
        if task_ids is not None:
            if row.task_id not in task_ids:
                continue
        elif row.split != run.split:
            continue
        chosen[(row.task_id, row.seed)] = row
    return chosen


def split_task_ids(workspace: Any, run: Any) -> set[str] | None:
    """The task ids of the run's suite split, when the workspace's suite is the run's."""
    return suite_split_ids(workspace, run.suite, run.split)


def suite_split_ids(
    workspace: Any, suite_name: str, split: str, suite_dir: Any = None
) -> set[str] | None:
    """The task ids of ``split`` of the suite named ``suite_name``: the suite at
    ``suite_dir`` when given, else the workspace's default suite; None when neither is it
    (callers then go by the split each rollout recorded)."""
    try:
        suite = workspace.load_suite(str(suite_dir) if suite_dir is not None else None)
        if suite.name != suite_name.split("@", 1)[0]:
            return None
        return {t.id for t in suite.tasks(split).tasks}
    except (HarnessctlError, OSError, ValueError, KeyError):
        return None
