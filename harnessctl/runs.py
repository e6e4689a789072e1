"""The runs in a store, and the rollouts each one stands on.

A run (``store.RunRow``) is one invocation of a command that evaluated a harness. Rollouts are
cache entries: a rollout row names the run that *executed* it, and later runs asking for the
same rollout are served the same row. A run's rollouts are its **membership**: the rollouts
it asked for and got, served from the cache or executed, recorded when it finishes
(``run_member``, migration 0008). So what a command prints for a run never changes
afterwards, whatever other runs of the same harness store later (an evolve's re-tests at
more seeds, say). A run still running stands on what it has executed so far. A run from
before membership was recorded is read as it used to be: by its selection (every stored
rollout of its harness and policy on a task of its suite split, the newest per (task,
seed)), which later rollouts can change; such a run is marked ``legacy``.

A run made by another (an evolve's judgements, confirmations and re-tests; a test's,
profile's or bench's evaluations) names it (``parent_id``); ``harnessctl runs`` lists the
runs a person started, the others folded under them, and ``harnessctl show RUN`` one run
with those it made. A run's policy is shown as its model and the params recorded with the
run (``model key=value``, credentials redacted), its identity hash kept in ``--json``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from .errors import HarnessctlError
from .policy import policy_label, shown_params
from .records import Record, Result

RUNS_RESULT_VERSION = 3  # 3: each run's policy_params
RUN_RESULT_VERSION = 1


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
    """The policy's identity (``model#hash`` of its params: what the cache and ``compare
    --policy`` go by)."""
    policy_params: dict[str, Any] = Field(default_factory=dict)
    """Its parameters as recorded with the run, credentials redacted (``policy_label`` is
    the two read together)."""
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
    parent_id: str | None = None
    """The run that made this one (an evolve), or None for a run a person started."""
    children: int = 0
    """Runs made by this one (folded under it unless ``--all``)."""

    @property
    def policy_label(self) -> str:
        """``sim/dbbench skill=0.8``: the policy as ``runs`` and ``show`` print it."""
        return policy_label(self.policy.partition("#")[0], self.policy_params)


class RunsResult(Result):
    """``harnessctl runs --json``: runs, newest first (top-level runs, children counted,
    unless ``all``)."""

    kind: Literal["runs"] = "runs"
    version: int = RUNS_RESULT_VERSION
    runs: list[RunItem] = Field(default_factory=list)


class RunResult(Result):
    """``harnessctl show RUN --json``: one run and the runs it made (a test's evaluations,
    an evolve's judgements...), oldest first."""

    kind: Literal["run"] = "run"
    version: int = RUN_RESULT_VERSION
    run: RunItem
    children: list[RunItem] = Field(default_factory=list)


def list_runs(
    store: Any,
    *,
    limit: int | None = None,
    status: str | None = None,
    everything: bool = False,
    harness: str | None = None,
    command: str | None = None,
    since: float | None = None,
) -> RunsResult:
    """The store's runs, newest first, with their counts and cost: the runs a person started
    (each with how many runs it made), or every run with ``everything``. Filters: status,
    harness name, command, started at or after ``since`` (a Unix time)."""
    names = _harness_names(store)
    runs = store.runs()
    children = _children(runs)
    items = []
    for run in runs:
        if run.parent_id and not everything:
            continue
        if status is not None and run.status != status:
            continue
        if command is not None and run.command != command:
            continue
        if harness is not None and names.get(run.harness_hash or "") != harness:
            continue
        if since is not None and run.started_at < since:
            continue
        item = run_item(store, run, names)
        item.children = children.get(run.id, 0)
        items.append(item)
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
        policy_params=_params(run),
        status=run.status,
        started_at=run.started_at,
        finished_at=run.finished_at,
        parent_id=run.parent_id,
        **counts,
    )


def _params(run: Any) -> dict[str, Any]:
    """The run's policy params as shown (:func:`harnessctl.policy.shown_params`); a row whose
    params do not parse (written by hand) shows none rather than failing the listing."""
    try:
        params = json.loads(run.params_json or "{}")
    except ValueError:
        return {}
    return shown_params(params) if isinstance(params, dict) else {}


def run_result(store: Any, run: Any) -> RunResult:
    """``run`` with the runs it made, oldest first (``show RUN``)."""
    names, every = _harness_names(store), store.runs()
    counts = _children(every)
    items = [
        run_item(store, r, names)
        for r in [run, *reversed(every)]
        if r is run or r.parent_id == run.id
    ]
    for item in items:
        item.children = counts.get(item.id, 0)
    return RunResult(run=items[0], children=items[1:])


def _children(runs: list[Any]) -> dict[str, int]:
    """Run id -> how many runs name it their parent."""
    counts: dict[str, int] = {}
    for run in runs:
        if run.parent_id:
            counts[run.parent_id] = counts.get(run.parent_id, 0) + 1
    return counts


def _harness_names(store: Any) -> dict[str, str]:
    return {h.hash: h.name for h in store.harnesses()}


def find_run(store: Any, ref: str) -> Any:
    """The run whose id is ``ref`` or starts with it (at least 4 characters, unique)."""
    ref = ref.strip()
    if len(ref) < 4:
        raise HarnessctlError(f"run id {ref!r}: give at least 4 characters")
    found = matching_runs(store, ref)
    if not found:
        raise HarnessctlError(f"no run with id {ref!r} (`harnessctl runs` lists them)")
    if len(found) > 1:
        raise HarnessctlError(f"run id {ref!r} is ambiguous: {len(found)} runs start with it")
    return found[0]


def matching_runs(store: Any, ref: str) -> list[Any]:
    """The runs whose id is ``ref`` or starts with it."""
    ref = ref.strip()
    return [r for r in store.runs() if r.id.startswith(ref)] if ref else []


WHOLE_EVALUATIONS = ("profile", "bench", "test")
"""Commands whose runs under another are each a harness's whole evaluation on the selection
(a profile's, a bench's, a test's), unlike an evolve's judgements and re-tests (extra seeds, chosen
pairs) or a routed eval's sub-runs (the routed tasks only)."""


def stands_for_harness(run: Any) -> bool:
    """Whether ``run`` can be "the" run of its harness (``compare`` by name, the report): one
    a person started, or a harness's whole evaluation inside a profile or bench."""
    return not run.parent_id or run.command in WHOLE_EVALUATIONS


def latest_run(
    store: Any,
    harness: str,
    *,
    suite: str | None = None,
    split: str | None = None,
    policy: str | None = None,
) -> Any:
    """The newest finished (``done``) run of the harness named ``harness`` with the given
    selection that a person asked for: an eval, or a harness's evaluation in a profile or a
    bench (runs under those commands' own); never an evolve's judgement or re-test."""
    names = _harness_names(store)
    for run in store.runs():
        if run.status != "done" or names.get(run.harness_hash or "") != harness:
            continue
        if not stands_for_harness(run):
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
    docstring): its membership; while it runs, what it executed; for a legacy run its
    selection (``task_ids``: its split's tasks when known)."""
    if run.membership:
        return {(r.task_id, r.seed): r for r in store.members(run.id)}
    if is_legacy(run):
        return _selection(store, run, task_ids)
    return {(r.task_id, r.seed): r for r in store.rollouts(run_id=run.id)}


def is_legacy(run: Any) -> bool:
    """A run that finished before membership was recorded (migration 0008): read by its
    selection. (A run still running, or one that died, stands on what it executed.)"""
    return not run.membership and run.status in ("done", "failed", "interrupted")


def _selection(store: Any, run: Any, task_ids: set[str] | None) -> dict:
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
