"""Evaluation: run a harness over a suite split with a policy, cached and resumable.

Every (task, seed) pair is one rollout, identified by its cache key (``run.key``: every
input that can change its outcome). A key already in the store, or in a read-through cache
the store is pointed at, is served from it; the rest run in parallel sandboxes, each
result written to the store as soon as it finishes, so an interrupted run loses nothing
finished and resumes where it stopped.
Infrastructure failures are retried (bounded) and recorded as attempts, never as rollouts.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

from ..constants import INFRA_RETRIES
from ..envs import Task, TaskProblem
from ..errors import InfraError
from ..harness import HarnessSpec, check_environment, rollout_version
from ..phases import phase
from ..policy import Policy
from ..sandbox import Limits
from ..suite import Suite
from ..summary import EvalRecord, SkippedTask, Summary, summarize
from .budget import resolve_budgets
from .checks import (
    check_model_params,
    check_policy_environment,
    check_policy_params,
    check_task_ids,
)
from .executor import EXECUTORS, Pending, Progress, check_executor
from .key import RolloutInputs

CLAIM_POLL_S = 1.0
"""How often a run waiting for another run's rollouts looks for them."""
_log = logging.getLogger(__name__)


@dataclass
class EvalRequest:
    harness: HarnessSpec
    suite: Suite
    split: str
    policy: Policy
    rollouts: int = 3
    seed: int = 0
    workers: int = 2
    sandbox: str = "local"
    limits: Limits = field(default_factory=Limits)
    max_calls: int | None = None
    """Model calls per rollout; None: the environment's ``max_calls`` (``resolve_budgets``)."""
    max_tokens: int | None = None
    """Prompt+completion tokens per rollout; None: the environment's ``max_tokens``."""
    task_ids: list[str] | None = None
    pairs: list[tuple[str, int]] | None = None
    """Explicit (task id, seed) pairs; overrides task_ids x seeds (paired re-evaluation)."""
    retries: int = INFRA_RETRIES
    upstream_retries: int = 3
    upstream_backoff_s: float = 0.5
    model_timeout_s: float | None = None
    """Seconds one model call may take (``--model-timeout``); None: 120 for a provider (its
    call re-sent on a timeout), 600 for a server on this machine (sent once). Not in the
    rollout's cache key: a call that runs out of time fails the rollout as infrastructure,
    which is retried and never stored; a reply that comes in time is the same under any
    timeout; a provider's call re-sent after one is a fresh draw of the same request, as
    after a 5xx (retries are not in the key either). Where the host waits long enough to
    matter, ``limits.max_wait_s`` (in the key) decides (docs/local-models.md)."""
    command: str = "eval"
    parent_run: str | None = None
    """The run this evaluation belongs to (an evolve's id): listed under it by ``runs``."""
    executor: str = "local"
    """Where rollouts run: ``local`` (threads on this machine) or ``ray`` (a Ray cluster)."""
    ray_address: str | None = None
    """Ray cluster to join (``auto``, ``ray://host:10001``, ``host:6379``); None: local."""
    fresh_container: bool = False
    """Docker: one container per rollout instead of the hardened warm ones (no reuse)."""

    def __post_init__(self) -> None:
        budgets = resolve_budgets(
            self.suite.environment, max_calls=self.max_calls, max_tokens=self.max_tokens
        )
        self.max_calls, self.max_tokens = budgets.max_calls, budgets.max_tokens


@dataclass
class EvalResult:
    run_id: str
    rows: list  # RolloutRow
    cached: int
    executed: int
    infra_failed: list[str]
    problems: list[TaskProblem]
    summary: Summary
    interrupted: bool = False

    def complete(self, what: str) -> EvalResult:
        """This result, or an ``InfraError`` when some rollouts failed on infrastructure:
        a judgement, profile or evolve step must not stand on a partial set (what finished
        is stored; a rerun retries only the rest)."""
        if self.infra_failed:
            raise InfraError(
                f"{what}: {len(self.infra_failed)} rollout(s) failed on infrastructure after "
                "retries (see `harnessctl rollouts --attempts`); run the command again to "
                "retry them, the finished ones are kept"
            )
        return self

    def record(self, request: EvalRequest) -> EvalRecord:
        """What ``eval --json`` prints: this result, typed and versioned."""
        return EvalRecord(
            run_id=self.run_id,
            harness=request.harness.name,
            harness_hash=request.harness.hash,
            policy=request.policy.id,
            cached=self.cached,
            executed=self.executed,
            infra_failed=len(self.infra_failed),
            problems=[SkippedTask(**vars(p)) for p in self.problems],
            summary=self.summary,
        )


def budget_key(request: EvalRequest) -> str:
    """A request's budgets, canonical: its sandbox limits and the gateway's call, token,
    step and reset caps (an evolve run's identity includes them: ``evolve.engine``)."""
    inputs = request_inputs(request, runtime="")
    budget = {
        **vars(inputs.limits),
        "max_calls": inputs.max_calls,
        "max_tokens": inputs.max_tokens,
        "max_steps": inputs.max_steps,
        "max_resets": inputs.max_resets,
    }
    return json.dumps(budget, sort_keys=True, separators=(",", ":"))


def request_inputs(
    request: EvalRequest, *, runtime: str, task: Task | None = None, seed: int = 0
) -> RolloutInputs:
    """The inputs of the rollout of ``task`` at ``seed`` under ``request`` (``runtime`` from
    ``harness.rollout_version``, computed once per request)."""
    from .. import bounds

    env = request.suite.environment
    budgets = resolve_budgets(env, max_calls=request.max_calls, max_tokens=request.max_tokens)
    return RolloutInputs(
        harness_hash=request.harness.hash,
        task_hash=task.content_hash if task is not None else "",
        policy_id=request.policy.id,
        seed=seed,
        runtime=runtime,
        env_options=dict(request.suite.config.env_options),
        limits=request.limits,
        max_calls=budgets.max_calls,
        max_tokens=budgets.max_tokens,
        max_steps=budgets.max_steps,
        max_resets=bounds.MAX_RESETS,
    )


def planned_jobs(
    request: EvalRequest, tasks: list[Task], runtime: str | None = None
) -> list[Pending]:
    """The (task, seed) jobs of ``request`` over ``tasks`` (narrowed to its ``task_ids``),
    each with its cache key: what :func:`evaluate` runs or serves from the store, and what the
    cost estimate counts before (``runtime``: the rollout's version, looked up when None)."""
    if runtime is None:
        runtime = rollout_version(request.suite.environment, request.policy.model)
    inputs = request_inputs(request, runtime=runtime)  # each job's differs in task and seed
    if request.pairs is not None:
        by_id = {t.id: t for t in tasks}
        chosen = [(by_id[tid], seed) for tid, seed in request.pairs if tid in by_id]
    else:
        seeds = range(request.seed, request.seed + request.rollouts)
        chosen = [(t, s) for t in tasks for s in seeds]
    return [
        Pending(t, s, replace(inputs, task_hash=t.content_hash, seed=s).key()) for t, s in chosen
    ]


def evaluate(
    request: EvalRequest,
    store,
    progress: Progress | None = None,
    before_run: Callable[[int], None] | None = None,
) -> EvalResult:
    """Run (or serve from the store) every rollout of the request. When some must run, a
    real model is first checked with one minimal call (``gateway.preflight``: exit 2 in
    seconds on a missing key or a dead server), then ``before_run(pending)`` is called (the
    CLI's cost estimate and confirmation); a fully cached run does neither."""

    check_executor(request.executor)
    suite = request.suite
    check_environment(request.harness, suite.config.env)
    check_policy_environment(request.policy.model, suite.config.env)
    check_policy_params(request.policy.model, request.policy.params)
    check_model_params(request.policy.model, request.policy.params, request.policy.secrets)
    kind = suite.config.env
    with phase(f"loading the tasks of suite {suite.name}, split {request.split} ({kind})"):
        taskset = suite.tasks(request.split)
    tasks = taskset.tasks
    if request.task_ids:
        check_task_ids(request.task_ids, [t.id for t in tasks], request.split)
        wanted = set(request.task_ids)
        tasks = [t for t in tasks if t.id in wanted]
    runtime = rollout_version(suite.environment, request.policy.model)
    harness = request.harness
    jobs = planned_jobs(request, tasks, runtime)
    found = store.get_by_cache_keys([j.cache_key for j in jobs])
    pending = [j for j in jobs if j.cache_key not in found]
    if pending:
        from ..gateway.preflight import preflight
        from ..harness import check_compiles

        check_compiles(harness)  # before any rollout runs (and is cached) failing

        from ..policies import is_offline

        model = request.policy.model  # a real one: litellm's import (seconds) and one call
        with nullcontext() if is_offline(model) else phase(f"checking that {model} answers"):
            preflight(model, request.policy.call_params)
        if before_run is not None:  # outside any phase: it may ask on the terminal
            before_run(len(pending))
    store.mark_dead_runs()  # a killed run's claims are free again
    run = start_run(store, request)
    rows = {k: found[k] for k in found}
    infra_failed: list[str] = []
    interrupted = False
    if progress:
        progress(f"start {request.command}: {harness.name}", len(rows), len(jobs))
    from_others = 0
    try:
        if pending:
            with _Heartbeat(store, run.id):
                from_others = _execute(
                    request,
                    store,
                    run.id,
                    runtime,
                    pending,
                    progress,
                    rows,
                    infra_failed,
                    len(jobs),
                )
    except KeyboardInterrupt:
        interrupted = True
        store.finish_run(run.id, "interrupted", None, _members(jobs, rows))
        raise
    except Exception:  # a configuration error found on the way (Ray address, node setup)
        store.finish_run(run.id, "failed", None, _members(jobs, rows))
        raise
    ordered = _members(jobs, rows)
    summary = summarize(ordered)
    status = "done" if not infra_failed else "failed"
    store.finish_run(run.id, status, summary.to_dict(), ordered)
    return EvalResult(
        run_id=run.id,
        rows=ordered,
        cached=len(found) + from_others,
        executed=len(ordered) - len(found) - from_others,
        infra_failed=infra_failed,
        problems=taskset.problems,
        summary=summary,
        interrupted=interrupted,
    )


def start_run(store, request: EvalRequest, command: str | None = None):
    """Record the request's harness and start its run (``command``: the request's own), under
    ``request.parent_run`` when it names one; the new run row."""
    from ..store import HarnessRow, RunRow

    harness = request.harness
    store.upsert_harness(
        HarnessRow(
            hash=harness.hash,
            name=harness.name,
            path=str(harness.path),
            manifest_json=harness.manifest.model_dump_json(),
            created_at=time.time(),
        )
    )
    return store.start_run(
        RunRow(
            id=uuid.uuid4().hex,
            command=command or request.command,
            harness_hash=harness.hash,
            suite=request.suite.name,
            split=request.split,
            policy_id=request.policy.id,
            params_json=json.dumps(run_settings(request), sort_keys=True),
            started_at=time.time(),
            status="running",
            parent_id=request.parent_run,
        )
    )


MODEL_TIMEOUT_KEY = "harnessctl:model_timeout_s"
"""The run row's key of the run's model-call timeout (a name no litellm parameter has)."""


def run_settings(request: EvalRequest) -> dict:
    """What a run row records of its request's settings: the policy's params and, under
    :data:`MODEL_TIMEOUT_KEY` when the run set one, its model-call timeout (absent: the
    endpoint's default)."""
    settings = dict(request.policy.params)
    if request.model_timeout_s is not None:
        settings[MODEL_TIMEOUT_KEY] = request.model_timeout_s
    return settings


def _members(jobs: list[Pending], rows: dict) -> list:
    """The rollouts the run asked for and got, in the order it asked for them."""
    return [rows[j.cache_key] for j in jobs if j.cache_key in rows]


def _execute(
    request: EvalRequest,
    store,
    run_id: str,
    runtime: str,
    pending: list[Pending],
    progress: Progress | None,
    rows: dict,
    infra_failed: list[str],
    total: int,
) -> int:
    """Run the pending rollouts this run can claim and wait for those a live concurrent run
    is executing (taking over any whose run ends without storing them), so no rollout is
    executed twice. Fills ``rows`` and ``infra_failed``; returns how many rows came from
    another run."""
    runner = make_runner(request, store, run_id, runtime)
    left, from_others = list(pending), 0
    while left:
        mine = store.claim_rollouts([j.cache_key for j in left], run_id)
        batch = [j for j in left if j.cache_key in mine]
        left = [j for j in left if j.cache_key not in mine]
        if batch:
            for key, row in runner.run_all(batch, progress, len(rows) + len(infra_failed), total):
                if row is None:
                    infra_failed.append(key)
                else:
                    rows[key] = row
        if not left:
            break
        time.sleep(CLAIM_POLL_S)
        found = store.get_by_cache_keys([j.cache_key for j in left])
        for job in left:
            if job.cache_key in found:
                rows[job.cache_key] = found[job.cache_key]
                from_others += 1
                if progress:
                    progress("rollout", len(rows) + len(infra_failed), total)
        left = [j for j in left if j.cache_key not in found]
    return from_others


class _Heartbeat:
    """Refreshes a run's heartbeat on a daemon thread while the run works."""

    def __init__(self, store, run_id: str) -> None:
        self.store, self.run_id = store, run_id
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def _beat(self) -> None:
        from ..liveness import HEARTBEAT_S

        while not self.stop.wait(HEARTBEAT_S):
            try:
                self.store.heartbeat(self.run_id)
            except Exception as exc:  # a missed beat is no reason to stop the run
                _log.warning("run %s: heartbeat not recorded: %s", self.run_id[:12], exc)

    def __enter__(self) -> _Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


def make_runner(request: EvalRequest, store, run_id: str, runtime: str):
    """The runner of ``request.executor`` from ``EXECUTORS``; each writes every result
    through :class:`harnessctl.run.record.Recorder`."""
    return EXECUTORS.create(request.executor, request, store, run_id, runtime)
