"""Table models of the store (sqlmodel, ``table=True``).

These classes describe rows; the schema itself is created by the numbered migrations in
``migrations/``, and a test asserts the two agree column for column. JSON payloads are
stored as TEXT (``*_json`` columns) so the schema stays portable between SQLite and
PostgreSQL. Timestamps are float epoch seconds.
"""

from __future__ import annotations

import time
import uuid

from sqlalchemy import Text
from sqlmodel import Field, SQLModel

RUN_STATUSES = ("running", "done", "failed", "interrupted", "died")
"""``died``: found ``running`` while its process was gone (killed); set by the next start."""


def new_id() -> str:
    """A fresh primary key: uuid4 as 32 hex characters."""
    return uuid.uuid4().hex


def trajectory_relpath(rollout_id: str) -> str:
    """Where a rollout's trajectory lives, relative to the trajectory directory."""
    return f"{rollout_id[:2]}/{rollout_id}.json.gz"


class HarnessRow(SQLModel, table=True):
    """A harness version, identified by the content hash of its directory."""

    __tablename__ = "harness"

    hash: str = Field(primary_key=True)
    name: str
    path: str
    manifest_json: str = Field(default="{}", sa_type=Text)
    created_at: float = Field(default_factory=time.time)


class RunRow(SQLModel, table=True):
    """One invocation of a command that produced rollouts (evaluate, evolve, ...)."""

    __tablename__ = "run"

    id: str = Field(default_factory=new_id, primary_key=True)
    command: str
    harness_hash: str | None = None
    suite: str = ""
    split: str = ""
    policy_id: str = ""
    params_json: str = Field(default="{}", sa_type=Text)
    started_at: float = Field(default_factory=time.time)
    finished_at: float | None = None
    status: str = "running"  # one of RUN_STATUSES
    summary_json: str | None = Field(default=None, sa_type=Text)
    host: str = ""
    """The machine the run's process runs on (its liveness is checked there by pid)."""
    pid: int | None = None
    pid_started: str = ""
    """The process's start time as the kernel counts it: a reused pid is not the run."""
    heartbeat_at: float | None = None
    """Refreshed while the run works: how another machine tells it is alive."""
    parent_id: str | None = Field(default=None, index=True)
    """The run this one was made by (an evolve's judgements, confirmations, re-tests), or
    None for a run a person started (migration 0008)."""
    membership: bool = False
    """Its membership (``run_member``) is recorded: every run that finished since migration
    0008; False for one still running, one that died, or one from before."""


class RunMemberRow(SQLModel, table=True):
    """One rollout a run asked for, served from the cache or executed (migration 0008): a
    run's figures are those of its members, whatever else is stored since."""

    __tablename__ = "run_member"

    run_id: str = Field(primary_key=True)
    rollout_id: str = Field(primary_key=True)
    task_id: str
    seed: int


class RolloutClaimRow(SQLModel, table=True):
    """A rollout a running run is executing: concurrent runs wait for it instead of
    executing it again; a dead run's claims are taken over."""

    __tablename__ = "rollout_claim"

    cache_key: str = Field(primary_key=True)
    run_id: str = Field(index=True)
    claimed_at: float = Field(default_factory=time.time)


class RolloutRow(SQLModel, table=True):
    """One finished episode of one harness on one task; also the rollout cache entry."""

    __tablename__ = "rollout"

    id: str = Field(default_factory=new_id, primary_key=True)
    cache_key: str = Field(unique=True, index=True)
    # No foreign key to run: a rollout is a cache entry that outlives the run that made it.
    run_id: str = Field(index=True)
    harness_hash: str = Field(index=True)
    harness_name: str = ""
    suite: str = ""
    split: str = ""
    task_id: str = Field(index=True)
    task_hash: str = ""
    category: str = ""
    policy_id: str = Field(index=True)
    policy_json: str = Field(default="{}", sa_type=Text)
    seed: int = 0
    runtime_version: str = ""
    outcome: str = Field(index=True)
    success: bool = False
    reward: float = 0.0
    steps: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    wall_s: float = 0.0
    isolation_json: str = Field(default="{}", sa_type=Text)
    error: str | None = Field(default=None, sa_type=Text)
    attempts: int = 1
    trajectory_path: str = ""  # set by Store.record_rollout from the id
    created_at: float = Field(default_factory=time.time)
    origin: str = ""
    """'' when the rollout ran against this store; else the read-through cache it was
    copied from (migration 0007)."""


class ModelCallRow(SQLModel, table=True):
    """One model call, whatever made it: the call log (migration 0004).

    ``purpose`` says who called (``harnessctl.store.calls.CALL_PURPOSES``): ``policy`` calls
    belong to a stored rollout (``rollout_id``) or to an infra-failed attempt
    (``attempt_id``), ``editor`` calls to an edit (``edit_id``, no foreign key: the call is
    logged before the edit is recorded), ``voter`` calls to whatever routing asked (a run,
    when there is one); ``env:<purpose>`` calls (``env:user``...) were made by a
    host-served episode of the rollout they belong to. ``params_json`` holds the call's
    parameters with secrets redacted.
    """

    __tablename__ = "model_call"

    id: str = Field(default="", primary_key=True)  # f"{owner id}:{idx}" or a fresh id
    purpose: str = Field(default="policy", index=True)
    rollout_id: str | None = Field(default=None, foreign_key="rollout.id", index=True)
    attempt_id: str | None = Field(default=None, foreign_key="attempt.id", index=True)
    edit_id: str | None = Field(default=None, index=True)
    run_id: str | None = Field(default=None, index=True)
    idx: int
    model: str = ""
    status: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    error: str | None = Field(default=None, sa_type=Text)
    reply: str | None = Field(default=None, sa_type=Text)
    params_json: str | None = Field(default=None, sa_type=Text)
    tool_calls_json: str | None = Field(default=None, sa_type=Text)  # migration 0005
    created_at: float = Field(default_factory=time.time)


class AttemptRow(SQLModel, table=True):
    """An infra-failed attempt that was retried: kept so nothing observed is lost."""

    __tablename__ = "attempt"

    id: str = Field(default_factory=new_id, primary_key=True)
    cache_key: str = Field(index=True)
    run_id: str = ""
    outcome: str = ""
    error: str = Field(default="", sa_type=Text)
    created_at: float = Field(default_factory=time.time)


class EditRow(SQLModel, table=True):
    """One editor proposal and everything that happened to it (training data)."""

    __tablename__ = "edit"

    id: str = Field(default_factory=new_id, primary_key=True)
    edit_key: str = Field(unique=True, index=True)
    evolve_id: str = Field(index=True)
    parent_hash: str = Field(index=True)
    parent_name: str
    direction: str
    round: int
    attempt: int
    editor: str
    prompt: str = Field(sa_type=Text)
    response: str = Field(sa_type=Text)
    patch: str = Field(default="", sa_type=Text)
    diff: str = Field(default="", sa_type=Text)
    status: str  # rejected | evaluated | accepted
    reason: str | None = None  # rejection reason code, or why not accepted
    detail: str | None = Field(default=None, sa_type=Text)
    batch_size: int = 0
    control_size: int = 0
    rescues: int = 0
    regressions: int = 0
    reward: float = 0.0
    p_value: float | None = None
    accepted: bool = False
    child_name: str | None = None
    child_hash: str | None = None
    git_commit: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    metrics_json: str = Field(default="{}", sa_type=Text)
    created_at: float = Field(default_factory=time.time)


class ProfileRow(SQLModel, table=True):
    """One build of a behavior profile of (harness hash, policy id, suite, split).

    Earlier builds are kept (``current`` false) so profiles stay queryable per policy.
    ``kind`` is ``full`` (every task of the split) or ``reanchor`` (a re-anchoring sample).
    """

    __tablename__ = "profile"

    id: str = Field(default_factory=new_id, primary_key=True)
    harness_hash: str = Field(index=True)
    harness_name: str
    policy_id: str = Field(index=True)
    suite: str
    split: str
    kind: str = "full"
    current: bool = True
    data_json: str = Field(default="{}", sa_type=Text)
    created_at: float = Field(default_factory=time.time)


TABLE_MODELS: tuple[type[SQLModel], ...] = (
    HarnessRow,
    RunRow,
    RunMemberRow,
    RolloutClaimRow,
    RolloutRow,
    ModelCallRow,
    AttemptRow,
    EditRow,
    ProfileRow,
)
