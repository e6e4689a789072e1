"""Evaluation: run a harness over a suite split with a policy, cached and resumable.

Every (task, seed) pair is one rollout, identified by its cache key: harness hash, task
content hash, policy id, seed and runtime version. A key already in the store is served
from it; the rest run in parallel sandboxes, each result written to the store as soon as
it finishes, so an interrupted run loses nothing finished and resumes where it stopped.
Infrastructure failures are retried (bounded) and recorded as attempts, never as rollouts.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from .constants import INFRA_RETRIES
from .envs import Environment, Task, TaskProblem
from .harness import HarnessSpec, runtime_version
from .outcomes import Outcome, classify
from .policy import Policy
from .sandbox import Job, Limits, Sandbox, SandboxResult
from .suite import Suite
from .summary import Summary, summarize

MAX_EVENTS_BYTES = 4 * 1024 * 1024


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
    max_calls: int = 40
    max_tokens: int = 60_000
    task_ids: list[str] | None = None
    pairs: list[tuple[str, int]] | None = None
    """Explicit (task id, seed) pairs; overrides task_ids x seeds (paired re-evaluation)."""
    retries: int = INFRA_RETRIES
    upstream_retries: int = 3
    upstream_backoff_s: float = 0.5
    command: str = "eval"


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


@dataclass(frozen=True)
class Pending:
    task: Task
    seed: int
    cache_key: str


def cache_key(harness_hash: str, task_hash: str, policy_id: str, seed: int, runtime: str) -> str:
    blob = json.dumps([harness_hash, task_hash, policy_id, seed, runtime])
    return hashlib.sha256(blob.encode()).hexdigest()


Progress = Callable[[str, int, int], None]  # (event, done, total)


def evaluate(request: EvalRequest, store, progress: Progress | None = None) -> EvalResult:
    """Run (or serve from the store) every rollout of the request."""
    from .store import HarnessRow, RunRow

    suite = request.suite
    taskset = suite.tasks(request.split)
    tasks = taskset.tasks
    if request.task_ids:
        wanted = set(request.task_ids)
        tasks = [t for t in tasks if t.id in wanted]
    runtime = runtime_version()
    harness = request.harness
    if request.pairs is not None:
        by_id = {t.id: t for t in tasks}
        chosen = [(by_id[tid], seed) for tid, seed in request.pairs if tid in by_id]
    else:
        seeds = range(request.seed, request.seed + request.rollouts)
        chosen = [(t, s) for t in tasks for s in seeds]
    jobs = [
        Pending(t, s, cache_key(harness.hash, t.content_hash, request.policy.id, s, runtime))
        for t, s in chosen
    ]
    found = store.get_by_cache_keys([j.cache_key for j in jobs])
    pending = [j for j in jobs if j.cache_key not in found]
    store.upsert_harness(
        HarnessRow(
            hash=harness.hash,
            name=harness.name,
            path=str(harness.path),
            manifest_json=harness.manifest.model_dump_json(),
            created_at=time.time(),
        )
    )
    run = store.start_run(
        RunRow(
            id=uuid.uuid4().hex,
            command=request.command,
            harness_hash=harness.hash,
            suite=suite.name,
            split=request.split,
            policy_id=request.policy.id,
            params_json=json.dumps(request.policy.params, sort_keys=True),
            started_at=time.time(),
            status="running",
        )
    )
    rows = {k: found[k] for k in found}
    infra_failed: list[str] = []
    interrupted = False
    if progress:
        progress("start", len(rows), len(jobs))
    try:
        if pending:
            runner = _Runner(request, store, run.id, runtime)
            for key, row in runner.run_all(pending, progress, len(rows), len(jobs)):
                if row is None:
                    infra_failed.append(key)
                else:
                    rows[key] = row
    except KeyboardInterrupt:
        interrupted = True
        store.finish_run(run.id, "interrupted", None)
        raise
    ordered = [rows[j.cache_key] for j in jobs if j.cache_key in rows]
    summary = summarize(ordered)
    store.finish_run(run.id, "done" if not infra_failed else "failed", summary.to_dict())
    return EvalResult(
        run_id=run.id,
        rows=ordered,
        cached=len(found),
        executed=len(ordered) - len(found),
        infra_failed=infra_failed,
        problems=taskset.problems,
        summary=summary,
        interrupted=interrupted,
    )


class _Runner:
    """Owns the gateway, the sandbox and the worker threads of one evaluation."""

    def __init__(self, request: EvalRequest, store, run_id: str, runtime: str) -> None:
        self.request = request
        self.store = store
        self.run_id = run_id
        self.runtime = runtime
        self.env: Environment = request.suite.environment
        self.local = threading.local()

    def run_all(self, pending: list[Pending], progress: Progress | None, done: int, total: int):
        from .gateway import Budget, Gateway
        from .sandbox import get_sandbox

        port = os.environ.get("HARNESSCTL_GATEWAY_PORT")
        workdir_root = Path(tempfile.mkdtemp(prefix="hxrun-"))
        os.chmod(workdir_root, 0o711)
        self.workdir_root = workdir_root
        self.budget = Budget(max_calls=self.request.max_calls, max_tokens=self.request.max_tokens)
        gateway = Gateway(
            port=int(port) if port else None,
            retries=self.request.upstream_retries,
            backoff_s=self.request.upstream_backoff_s,
        )
        sandbox: Sandbox = get_sandbox(self.request.sandbox)
        try:
            # litellm takes seconds to import: pay it before the clock of any rollout starts
            from .gateway.llm import get_litellm

            get_litellm()
            gateway.start()
            sandbox.start(gateway.socket_path.parent if gateway.socket_path else None)
            self.gateway, self.sandbox = gateway, sandbox
            workers = max(1, self.request.workers)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout") as pool:
                queue = list(pending)
                futures: dict[Future, Pending] = {}
                while queue or futures:
                    while queue and len(futures) < workers:
                        job = queue.pop(0)
                        futures[pool.submit(self.run_with_retries, job)] = job
                    finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        job = futures.pop(fut)
                        done += 1
                        if progress:
                            progress("rollout", done, total)
                        yield job.cache_key, fut.result()
        finally:
            sandbox.close()
            gateway.close()
            shutil.rmtree(workdir_root, ignore_errors=True)

    def run_with_retries(self, job: Pending):
        from .store import AttemptRow

        for attempt in range(1, self.request.retries + 2):
            row, record = self.run_one(job, attempt)
            if row.outcome != Outcome.INFRA_ERROR:
                return self.store.record_rollout(row, *record)
            self.store.record_attempt(
                AttemptRow(
                    id=uuid.uuid4().hex,
                    cache_key=job.cache_key,
                    run_id=self.run_id,
                    outcome=row.outcome,
                    error=row.error,
                    created_at=time.time(),
                )
            )
        return None

    def run_one(self, job: Pending, attempt: int):
        from .policies import oracle

        request, task = self.request, job.task
        rollout_id = uuid.uuid4().hex
        workdir = self.workdir_root / rollout_id
        workdir.mkdir()
        self.env.prepare(task, workdir)
        oracle.register(rollout_id, self.env.oracle(task))
        token = self.gateway.open_rollout(
            rollout_id,
            model=request.policy.model,
            params=dict(request.policy.params),
            budget=self.budget,
            metadata={"task_id": task.id, "seed": job.seed},
        )
        env = {
            "HXRT_GATEWAY": self.gateway.address,
            "HXRT_TOKEN": token,
            "HXRT_MANIFEST": request.harness.manifest.model_dump_json(),
            "HXRT_LIMITS": json.dumps(request.limits.rlimits()),
        }
        started = time.time()
        try:
            result = self.sandbox.run(
                Job(rollout_id, request.harness, workdir, env, request.limits)
            )
        finally:
            ledger = self.gateway.close_rollout(token)
            oracle.unregister(rollout_id)
        try:
            return self._record(job, rollout_id, attempt, workdir, result, ledger, started)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _record(
        self,
        job: Pending,
        rollout_id: str,
        attempt: int,
        workdir: Path,
        result: SandboxResult,
        ledger,
        started: float,
    ):
        from .store import ModelCallRow, RolloutRow

        task, request = job.task, self.request
        runtime_result = _read_result(workdir)
        events = _read_events(workdir)
        status = runtime_result.get("status") if runtime_result else None
        answer = runtime_result.get("answer") if runtime_result else None
        if answer is not None and not isinstance(answer, str):
            answer = json.dumps(answer)
        score = None
        scorable = (
            not result.timed_out
            and result.infra_error is None
            and status not in (None, "harness_error", "infra_error")
        )
        if scorable:
            score = self.env.score(task, workdir, answer)
        infra = result.infra_error or ledger.infra_error
        outcome = classify(
            infra_error=infra is not None,
            timed_out=result.timed_out,
            runtime_status=status,
            success=bool(score and score.success),
            answer_unparsable=bool(score and score.answer_unparsable),
            tool_error_streak=int((runtime_result or {}).get("tool_error_streak") or 0),
        )
        error = _error_text(outcome, result, runtime_result, infra)
        trajectory = {
            "rollout_id": rollout_id,
            "task_id": task.id,
            "seed": job.seed,
            "harness": {"name": request.harness.name, "hash": request.harness.hash},
            "policy": {"model": request.policy.model, "params": request.policy.params},
            "outcome": outcome.value,
            "result": runtime_result,
            "score": None
            if score is None
            else {
                "success": score.success,
                "answer_unparsable": score.answer_unparsable,
                "detail": score.detail,
            },
            "events": events,
            "calls": [_call_dict(c) for c in ledger.calls],
            "sandbox": {
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "wall_s": result.wall_s,
                "stdout_tail": result.stdout_tail,
                "stderr_tail": result.stderr_tail,
                "isolation": result.isolation,
            },
        }
        row = RolloutRow(
            id=rollout_id,
            cache_key=job.cache_key,
            run_id=self.run_id,
            harness_hash=request.harness.hash,
            harness_name=request.harness.name,
            suite=request.suite.name,
            split=request.split,
            task_id=task.id,
            task_hash=task.content_hash,
            category=task.category,
            policy_id=request.policy.id,
            policy_json=json.dumps(
                {"model": request.policy.model, "params": request.policy.params}, sort_keys=True
            ),
            seed=job.seed,
            runtime_version=self.runtime,
            outcome=outcome.value,
            success=outcome == Outcome.SUCCESS,
            reward=1.0 if outcome == Outcome.SUCCESS else 0.0,
            steps=int((runtime_result or {}).get("rounds") or 0),
            model_calls=len(ledger.calls),
            prompt_tokens=ledger.prompt_tokens,
            completion_tokens=ledger.completion_tokens,
            cost_usd=ledger.cost_usd,
            latency_s=ledger.latency_s,
            wall_s=time.time() - started,
            isolation_json=json.dumps(result.isolation, sort_keys=True),
            error=error,
            attempts=attempt,
            trajectory_path="",
            created_at=time.time(),
        )
        calls = [
            ModelCallRow(
                id=f"{rollout_id}:{c.index}",
                rollout_id=rollout_id,
                idx=c.index,
                model=c.model,
                status=c.status,
                prompt_tokens=c.prompt_tokens,
                completion_tokens=c.completion_tokens,
                cost_usd=c.cost_usd,
                latency_s=c.latency_s,
                attempts=c.attempts,
                error=c.error,
                reply=c.reply,
                created_at=c.started_at,
            )
            for c in ledger.calls
        ]
        return row, (calls, trajectory)


def _call_dict(call) -> dict:
    return {
        "index": call.index,
        "model": call.model,
        "messages": call.messages,
        "params": call.params,
        "reply": call.reply,
        "status": call.status,
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": call.completion_tokens,
        "cost_usd": call.cost_usd,
        "latency_s": call.latency_s,
        "attempts": call.attempts,
        "error": call.error,
    }


def _read_result(workdir: Path) -> dict | None:
    """result.json is written by untrusted code: accept only a well-typed mapping."""
    path = workdir / "result.json"
    if not path.is_file() or path.is_symlink() or path.stat().st_size > 1_000_000:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("status"), str):
        return None
    return data


def _read_events(workdir: Path) -> list[dict]:
    path = workdir / "events.jsonl"
    if not path.is_file() or path.is_symlink():
        return []
    events = []
    with open(path, "rb") as fh:
        raw = fh.read(MAX_EVENTS_BYTES)
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            events.append(item)
    return events


def _error_text(
    outcome: Outcome, result: SandboxResult, runtime_result: dict | None, infra: str | None
) -> str | None:
    if outcome == Outcome.INFRA_ERROR:
        return infra or (runtime_result or {}).get("error") or "infrastructure failure"
    if outcome == Outcome.TIMEOUT:
        return f"killed after the wall-clock limit ({result.wall_s:.1f}s)"
    if outcome == Outcome.HARNESS_ERROR:
        if runtime_result and runtime_result.get("error"):
            return str(runtime_result["error"])
        tail = result.stderr_tail.strip().splitlines()
        detail = tail[-1] if tail else "no output"
        return f"runtime exited with code {result.exit_code} without a result: {detail}"
    return None
