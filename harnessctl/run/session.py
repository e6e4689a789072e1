"""One rollout, start to finish: prepare the task, open a gateway ledger, run the harness in
a sandbox, read what it left, score it on the host, classify the outcome.

``RolloutSession`` keeps the gateway and the sandbox warm across rollouts of any harness
and policy; ``evaluate`` drives it from worker threads and stores results, and the pool
API (``Pool.harness(name).rollout``) uses it directly for trainers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import stat
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..bounds import MAX_EVENTS_BYTES, MAX_RESULT_BYTES, ScoringLimit, clip_error
from ..constants import (
    ENV_GATEWAY_PORT,
    RT_ENV_ENV,
    RT_ENV_GATEWAY,
    RT_ENV_LIMITS,
    RT_ENV_MANIFEST,
    RT_ENV_TOKEN,
)
from ..envs import Environment, Episode, Score, Task
from ..errors import ConfigError
from ..gateway.ledger import RolloutLedger
from ..gateway.protocol import redact
from ..harness import HarnessSpec
from ..outcomes import Outcome, classify
from ..policy import Policy
from ..records import (
    HarnessRef,
    ModelCall,
    PolicyRef,
    RuntimeResult,
    SandboxRecord,
    ScoreRecord,
    Trajectory,
)
from ..sandbox import Job, Limits, Sandbox, SandboxResult, mark_owner, reap_stale
from ..untrusted import checked_result, parse_events
from .budget import resolve_budgets


@dataclass(frozen=True)
class _Scored:
    """What scoring a finished run found: the result file (checked), its problem, the status
    the harness reported, the environment's score and a scoring-time limit hit."""

    runtime_result: dict | None
    problem: str | None
    status: str | None
    score: Score | None
    score_limit: str | None
    score_error: str | None = None


@dataclass
class RolloutRecord:
    """Everything one rollout produced (not yet stored)."""

    rollout_id: str
    task: Task
    seed: int
    harness: HarnessSpec
    policy: Policy
    outcome: Outcome
    error: str | None
    runtime_result: dict | None
    trajectory: Trajectory
    ledger: RolloutLedger
    isolation: dict
    wall_s: float

    @property
    def success(self) -> bool:
        return self.outcome == Outcome.SUCCESS

    @property
    def reward(self) -> float:
        return 1.0 if self.success else 0.0

    @property
    def steps(self) -> int:
        return int((self.runtime_result or {}).get("rounds") or 0)


class RolloutSession:
    """A warm gateway + sandbox for one environment; thread-safe ``run``."""

    def __init__(
        self,
        env: Environment,
        *,
        sandbox: str = "local",
        limits: Limits | None = None,
        max_calls: int | None = None,
        max_tokens: int | None = None,
        upstream_retries: int = 3,
        upstream_backoff_s: float = 0.5,
        model_timeout_s: float | None = None,
        sandbox_options: dict | None = None,
        real_model: bool = True,
    ) -> None:
        """``real_model``: whether the rollouts call a real model (litellm is then imported
        at ``start``, before any rollout's clock); False for offline test doubles only."""
        self.env = env
        self.real_model = real_model
        self.sandbox_name = sandbox
        self.sandbox_options = dict(sandbox_options or {})
        self.limits = limits or Limits()
        # None: the environment's own (the one rule of ``resolve_budgets``)
        self.budgets = resolve_budgets(env, max_calls=max_calls, max_tokens=max_tokens)
        self.upstream_retries, self.upstream_backoff_s = upstream_retries, upstream_backoff_s
        self.model_timeout_s = model_timeout_s  # None: the endpoint's default (llm.call_timeout)
        self._started = False

    def start(self) -> RolloutSession:
        from ..gateway import Budget, Gateway
        from ..gateway.llm import get_litellm
        from ..sandbox import get_sandbox

        port = os.environ.get(ENV_GATEWAY_PORT)
        reap_stale()  # what a run killed with SIGKILL left behind
        self.workdir_root = Path(tempfile.mkdtemp(prefix="hxrun-"))
        mark_owner(self.workdir_root)
        os.chmod(self.workdir_root, 0o711)
        self.budget = Budget(
            max_calls=self.budgets.max_calls,
            max_tokens=self.budgets.max_tokens,
            max_steps=self.budgets.max_steps,
        )
        self.gateway = Gateway(
            port=int(port) if port else None,
            retries=self.upstream_retries,
            backoff_s=self.upstream_backoff_s,
            timeout_s=self.model_timeout_s,
        )
        self.sandbox: Sandbox = get_sandbox(self.sandbox_name, **self.sandbox_options)
        # litellm (seconds to import) only for a real model, before any rollout's clock
        # starts; offline test doubles are answered without it (gateway.llm)
        if self.real_model:
            get_litellm()
        self.gateway.start()
        socket = self.gateway.socket_path
        self.sandbox.start(socket.parent if socket else None)
        self._started = True
        return self

    def close(self) -> None:
        if self._started:
            self.sandbox.close()
            self.gateway.close()
            shutil.rmtree(self.workdir_root, ignore_errors=True)
            self._started = False

    def __enter__(self) -> RolloutSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, harness: HarnessSpec, task: Task, seed: int, policy: Policy) -> RolloutRecord:
        from ..policies import offline_channel

        rollout_id = uuid.uuid4().hex
        workdir = self.workdir_root / rollout_id
        workdir.mkdir()
        episode: Episode | None = None
        try:
            self.env.prepare(task, workdir)
            if self.env.surface == "host":
                episode = self.env.open_episode(task, seed)
            token = self.gateway.open_rollout(
                rollout_id,
                model=policy.model,
                params=policy.call_params,  # credentials too: upstream only, never stored
                budget=self.budget,
                metadata={"task_id": task.id, "seed": seed, "harness": harness.hash},
                episode=episode,
            )
            if episode is not None:  # its own model calls, recorded apart (ModelAccess)
                episode.models = self.gateway.model_access(token)
            env = {
                RT_ENV_GATEWAY: self.gateway.address,
                RT_ENV_TOKEN: token,
                RT_ENV_MANIFEST: harness.manifest.model_dump_json(),
                RT_ENV_LIMITS: json.dumps(self.limits.rlimits()),
                RT_ENV_ENV: json.dumps(self.env.runtime_binding()),
            }
            code = self.env.sandbox_code
            job = Job(
                rollout_id,
                harness,
                workdir,
                env,
                self.limits,
                (code,) if code else (),
                waited=functools.partial(self.gateway.waited_s, token),
            )
            started = time.time()
            # an offline test double sees the task's view (gold) only while it runs
            with offline_channel(policy.model, rollout_id, self.env, task):
                try:
                    result = self.sandbox.run(job)
                    # scored before the ledger closes: an episode's own model calls while
                    # scoring (a judge) are recorded with the rollout's
                    scored = self._score(task, workdir, result, episode)
                finally:
                    ledger = self.gateway.close_rollout(token)
            return self._finish(
                rollout_id, harness, task, seed, policy, workdir, result, scored, ledger, started
            )
        finally:
            if episode is not None:
                with contextlib.suppress(Exception):  # a broken episode was already recorded
                    episode.close()
            shutil.rmtree(workdir, ignore_errors=True)

    def _score(
        self, task: Task, workdir: Path, result: SandboxResult, episode: Episode | None
    ) -> _Scored:
        """The harness's result file, checked, and the environment's score of the run (none
        when the run timed out, failed on the host or reported no usable result)."""
        _drop_special_files(workdir)  # scoring opens files by name: no links, no FIFOs
        runtime_result, problem = _checked_result(workdir)  # malformed: harness_error
        status = runtime_result.get("status") if runtime_result else None
        answer = runtime_result.get("answer") if runtime_result else None
        if answer is not None and not isinstance(answer, str):
            answer = json.dumps(answer)
        score, score_limit = None, None
        if (
            not result.timed_out
            and result.infra_error is None
            and status not in (None, "harness_error", "infra_error")
        ):
            try:
                score = self.env.score(task, workdir, answer, episode)
            except ScoringLimit as exc:  # the state it left could not be scored in time
                score_limit = str(exc)
            except Exception as exc:  # the host's scoring failed (a judge model down): infra
                failed = f"scoring failed on the host: {type(exc).__name__}: {exc}"
                return _Scored(runtime_result, problem, status, None, None, clip_error(failed))
        return _Scored(runtime_result, problem, status, score, score_limit)

    def _finish(
        self,
        rollout_id,
        harness,
        task,
        seed,
        policy,
        workdir: Path,
        result: SandboxResult,
        scored: _Scored,
        ledger,
        started: float,
    ) -> RolloutRecord:
        runtime_result, problem, status = scored.runtime_result, scored.problem, scored.status
        score, score_limit = scored.score, scored.score_limit
        infra = result.infra_error or ledger.infra_error or scored.score_error
        host_error = score_limit or ledger.record_limit or problem
        outcome = classify(
            infra_error=infra is not None,
            timed_out=result.timed_out or score_limit is not None,
            record_limit=ledger.record_limit is not None,
            runtime_status=status,
            success=bool(score and score.success),
            answer_unparsable=bool(score and score.answer_unparsable),
            tool_error_streak=int((runtime_result or {}).get("tool_error_streak") or 0),
        )
        trajectory = Trajectory(
            rollout_id=rollout_id,
            task_id=task.id,
            seed=seed,
            env=task.env,
            harness=HarnessRef(name=harness.name, hash=harness.hash),
            # a credential given shows as "***": that one was set, never what it was
            policy=PolicyRef(model=policy.model, params=redact(policy.call_params)),
            outcome=outcome.value,
            result=RuntimeResult.model_validate(runtime_result) if runtime_result else None,
            score=None
            if score is None
            else ScoreRecord(
                success=score.success,
                answer_unparsable=score.answer_unparsable,
                detail=score.detail,
            ),
            events=_read_events(workdir),
            calls=[_call_record(c) for c in ledger.calls],
            env_calls=[_call_record(c) for c in ledger.env_calls],
            steps=list(ledger.steps),
            sandbox=SandboxRecord(
                exit_code=result.exit_code,
                timed_out=result.timed_out,
                wall_s=result.wall_s,
                stdout_tail=result.stdout_tail,
                stderr_tail=result.stderr_tail,
                isolation=result.isolation,
            ),
        )
        return RolloutRecord(
            rollout_id=rollout_id,
            task=task,
            seed=seed,
            harness=harness,
            policy=policy,
            outcome=outcome,
            error=_error_text(outcome, result, runtime_result, infra, host_error),
            runtime_result=runtime_result,
            trajectory=trajectory,
            ledger=ledger,
            isolation=result.isolation,
            wall_s=time.time() - started,
        )


def _call_record(call) -> ModelCall:
    return ModelCall(
        index=call.index,
        model=call.model,
        messages=call.messages,
        params=call.params,
        reply=call.reply,
        tools=getattr(call, "tools", None),
        tool_calls=list(getattr(call, "tool_calls", None) or []),
        status=call.status,
        finish_reason=getattr(call, "finish_reason", None),
        prompt_ids=getattr(call, "prompt_ids", None),
        completion_ids=getattr(call, "completion_ids", None),
        logprobs=getattr(call, "logprobs", None),
        prompt_tokens=call.prompt_tokens,
        completion_tokens=call.completion_tokens,
        cost_usd=call.cost_usd,
        latency_s=call.latency_s,
        attempts=call.attempts,
        error=call.error,
        caller=getattr(call, "caller", "agent"),
    )


def read_untrusted(path: Path, limit: int, *, truncate: bool = False) -> bytes | None:
    """At most ``limit`` bytes of a file the sandbox could have written or replaced: opened
    without following a symlink and without blocking (a FIFO), and only if it is a regular
    file; None otherwise, and when larger than ``limit`` (its first ``limit`` bytes with
    ``truncate``)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_size > limit and not truncate):
            return None
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            return data[:limit] if truncate else None
        return data
    except OSError:
        return None
    finally:
        os.close(fd)


def _drop_special_files(workdir: Path) -> None:
    """Remove what the sandbox left in its task directory that is not a regular file or a
    directory (symlinks, FIFOs, sockets, devices), so that nothing the host reads there by
    name afterwards (the environment's scoring) follows or blocks on it."""
    for dirpath, dirnames, filenames in os.walk(workdir, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                mode = os.lstat(path).st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    os.unlink(path)
                    if name in dirnames:
                        dirnames.remove(name)


def _checked_result(workdir: Path) -> tuple[dict | None, str | None]:
    """result.json is written by untrusted code: a well-typed mapping, or None and why."""
    path = workdir / "result.json"
    raw = read_untrusted(path, MAX_RESULT_BYTES)
    return checked_result(raw, os.path.lexists(path))


def _read_result(workdir: Path) -> dict | None:
    return _checked_result(workdir)[0]


def _read_events(workdir: Path) -> list[dict]:
    return parse_events(read_untrusted(workdir / "events.jsonl", MAX_EVENTS_BYTES, truncate=True))


def _error_text(
    outcome: Outcome,
    result: SandboxResult,
    runtime_result: dict | None,
    infra: str | None,
    host: str | None = None,
) -> str | None:
    """The rollout's error; ``host`` is what the host found after the sandbox ended (scoring
    stopped at its limit, the record bound hit, a malformed result.json)."""
    if outcome == Outcome.INFRA_ERROR:
        return infra or "infrastructure failure"
    if outcome == Outcome.TIMEOUT and result.timed_out:
        return f"killed after the wall-clock limit ({result.wall_s:.1f}s)"
    if host is not None:
        return host
    if outcome == Outcome.HARNESS_ERROR and (runtime_result or {}).get("status") == "infra_error":
        said = (runtime_result or {}).get("error") or "no detail"
        return f"the runtime reported an infrastructure failure the host did not observe: {said}"
    if outcome == Outcome.HARNESS_ERROR:
        if runtime_result and runtime_result.get("error"):
            return str(runtime_result["error"])
        tail = result.stderr_tail.strip().splitlines()
        detail = tail[-1] if tail else "no output"
        return f"runtime exited with code {result.exit_code} without a result: {detail}"
    return None


def check_run_config(ledger: RolloutLedger | None, policy: Policy) -> None:
    """Stop the run when the provider refused its configuration (``ledger.config_error``):
    every rollout would fail the same way, and none of it is the harness's doing."""
    if ledger is not None and ledger.config_error:
        if ledger.config_error.startswith("env:"):  # an episode's own model (ModelAccess)
            raise ConfigError(
                "env_options",
                "the provider refused the environment's model configuration (model name, "
                f"credentials or parameters): {ledger.config_error}",
            )
        raise ConfigError(
            f"policy {policy.model}",
            f"the provider refused this run's configuration (model name, credentials or a "
            f"--param): {ledger.config_error}",
        )
