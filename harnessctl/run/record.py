"""Writing finished rollouts into the store: every executor's results go through
:class:`Recorder`, so a rollout is stored the same way wherever it ran."""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING

from .executor import Pending
from .session import RolloutRecord

if TYPE_CHECKING:
    from .evaluate import EvalRequest


class Recorder:
    """Writes the results of one evaluation's rollouts into the store.

    Idempotent by cache key (``Store.record_rollout``), so a result delivered twice (a retried
    task whose first run finished after all) is stored once.
    """

    def __init__(self, request: EvalRequest, store, run_id: str, runtime: str) -> None:
        self.request = request
        self.store = store
        self.run_id = run_id
        self.runtime = runtime

    def record(self, job: Pending, record: RolloutRecord, attempt: int):
        row, calls = self._rows(job, record, attempt)
        return self.store.record_rollout(row, calls, record.trajectory)

    def record_attempt(self, job: Pending, outcome: str, error: str, ledger=None) -> None:
        """Record an infra-failed attempt with the model calls of its ``ledger`` (when the
        executor got one back): they were made and paid for even though it is retried."""
        from ..store import AttemptRow

        attempt_id = uuid.uuid4().hex
        self.store.record_attempt(
            AttemptRow(
                id=attempt_id,
                cache_key=job.cache_key,
                run_id=self.run_id,
                outcome=outcome,
                error=error,
                created_at=time.time(),
            ),
            call_rows(ledger.calls + ledger.env_calls, attempt_id, self.run_id)
            if ledger is not None
            else [],
        )

    def _rows(self, job: Pending, rec: RolloutRecord, attempt: int):
        from ..store import RolloutRow

        request, task, ledger = self.request, job.task, rec.ledger
        row = RolloutRow(
            id=rec.rollout_id,
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
            outcome=rec.outcome.value,
            success=rec.success,
            reward=rec.reward,
            steps=rec.steps,
            model_calls=len(ledger.calls),
            prompt_tokens=ledger.prompt_tokens,
            completion_tokens=ledger.completion_tokens,
            cost_usd=ledger.cost_usd,
            latency_s=ledger.latency_s,
            wall_s=rec.wall_s,
            isolation_json=json.dumps(rec.isolation, sort_keys=True),
            error=rec.error,
            attempts=attempt,
            trajectory_path="",
            created_at=time.time(),
        )
        return row, call_rows(ledger.calls + ledger.env_calls, rec.rollout_id, self.run_id)


def call_rows(calls: list, owner_id: str, run_id: str) -> list:
    """``ModelCallRow``s of a ledger's calls (``CallRecord``), params redacted; the store
    sets the owner (rollout or attempt) when it writes them. The agent's calls have the
    purpose ``policy``, an episode's own (``env_calls``) their caller, ``env:<purpose>``."""
    from ..store.store import call_row

    rows = []
    for c in calls:
        caller = getattr(c, "caller", "agent")
        purpose = "policy" if caller == "agent" else caller
        row_id = f"{owner_id}:{c.index}" if caller == "agent" else f"{owner_id}:{caller}:{c.index}"
        rows.append(call_row(c, id=row_id, idx=c.index, purpose=purpose, run_id=run_id))
    return rows
