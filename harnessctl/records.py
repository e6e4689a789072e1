"""Typed, versioned records passed between stages: trajectories and behavior profiles.

Every consumer (``show``, the report, digests for editors, the Pool API, exports, profiles,
routing, regression tests) reads these models, never string keys of a loose dict. Both carry
a format version; a record written by an older version is upgraded when read
(:meth:`Trajectory.load`, :meth:`Profile.load`), and a record of a newer, unknown version is
refused with an error naming it.

The trajectory format is documented in docs/trajectory.md.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError, HarnessctlError

TRAJECTORY_FORMAT = 5
PROFILE_VERSION = 1


class Record(BaseModel):
    """The base of every typed record and command result in harnessctl: unknown fields are
    refused. A versioned one names its format in a field called ``version`` (the one name
    for it); a command's ``--json`` output also starts with ``kind`` (see :class:`Result`)."""

    model_config = ConfigDict(extra="forbid")


class Result(Record):
    """The ``--json`` envelope of every command: ``kind`` (what it is), ``version`` (its
    format), then the payload's fields. Subclasses narrow ``kind`` to a literal."""

    kind: str
    version: int = 1


def clip(text: Any, limit: int, *, one_line: bool = False, suffix: str | None = None) -> str:
    """``text`` (JSON for non-strings) cut to ``limit`` characters, then ``suffix`` (default:
    a note of how many were cut); ``one_line`` writes newlines as ``\\n`` first. The one
    clipping rule of every view of a trajectory (show, the report, editor digests)."""
    if text is None:
        s = ""
    elif isinstance(text, str):
        s = text
    else:
        import json

        s = json.dumps(text, default=str)
    if one_line:
        s = s.replace("\n", "\\n")
    if len(s) <= limit:
        return s
    return s[:limit] + (suffix if suffix is not None else f"... [{len(s) - limit} more chars]")


# --- trajectories ----------------------------------------------------------------------------


class HarnessRef(Record):
    """Which harness ran: its name and content hash."""

    name: str
    hash: str


class PolicyRef(Record):
    """Which policy answered: the litellm model string and its parameters, secrets redacted."""

    model: str
    params: dict[str, Any] = Field(default_factory=dict)


class ModelCall(Record):
    """One request the harness made to the gateway, answered or refused (the ledger's record)."""

    index: int
    model: str
    messages: list[dict[str, Any]]
    params: dict[str, Any] = Field(default_factory=dict)
    """Parameters sent upstream, secrets redacted."""
    reply: str | None = None
    tools: list[dict[str, Any]] | None = None
    """The function tools the request offered (OpenAI format), if any."""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    """The function calls the reply made (OpenAI format)."""
    status: str = "ok"
    finish_reason: str | None = None
    """Why the reply ended, as the provider said: ``stop``, ``length`` (cut at the token
    limit), ``tool_calls``...; None when it did not say (or for format 1 documents)."""
    prompt_ids: list[int] | None = None
    """The prompt's token ids as the server tokenized it, when the policy asked for token
    ids (``return_token_ids``) and the server said (format 3; docs/trajectory.md)."""
    completion_ids: list[int] | None = None
    """The reply's token ids, when asked for (``return_token_ids`` or ``logprobs``) and
    returned."""
    logprobs: list[float] | None = None
    """Each reply token's logprob, when asked for (``logprobs``) and returned."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    error: str | None = None
    caller: str = "agent"
    """Who made the call: ``agent`` (the harness) or ``env:<purpose>`` (the environment's
    episode on the host: a simulated user, a judge; then in ``Trajectory.env_calls``)."""


class EnvStep(Record):
    """One reset or step of a host-served environment's episode, as recorded on the host."""

    index: int
    kind: Literal["reset", "step"]
    tool: str | None = None
    argument: str = ""
    arguments: dict[str, Any] | None = None
    observation: str = ""
    done: bool = False
    info: dict[str, Any] = Field(default_factory=dict)
    status: str = "ok"
    """``ok``, ``rejected`` (info["error"]), ``step_budget_exceeded``, ``reset_budget_exceeded``
    or ``env_error``."""
    error: str | None = None
    latency_s: float = 0.0
    started_at: float = 0.0


class RuntimeResult(Record):
    """What the sandboxed runtime reported in ``result.json`` (untrusted; type-checked)."""

    model_config = ConfigDict(extra="ignore")

    status: str
    answer: Any = None
    rounds: int = 0
    tool_error_streak: int = 0
    error: str | None = None
    traceback: str | None = None


class ScoreRecord(Record):
    """The host's verdict on the episode."""

    success: bool
    answer_unparsable: bool = False
    detail: dict[str, Any] = Field(default_factory=dict)


class SandboxRecord(Record):
    """How the sandbox ran the rollout."""

    exit_code: int | None = None
    timed_out: bool = False
    wall_s: float = 0.0
    stdout_tail: str = ""
    stderr_tail: str = ""
    isolation: dict[str, Any] = Field(default_factory=dict)


class Trajectory(Result):
    """Everything one rollout left: the runtime's events, the gateway's ledger of model calls,
    the environment's steps, the host's score and outcome (``show --json`` prints it)."""

    kind: Literal["trajectory"] = "trajectory"
    version: int = TRAJECTORY_FORMAT
    rollout_id: str
    task_id: str
    seed: int
    env: str = ""
    harness: HarnessRef
    policy: PolicyRef
    outcome: str
    result: RuntimeResult | None = None
    score: ScoreRecord | None = None
    events: list[dict[str, Any]] = Field(default_factory=list)
    """The runtime's event log (``start``, ``reset``, ``turn``, ``model_error``, ``end``...),
    written by untrusted code: free-form, bounded in size."""
    calls: list[ModelCall] = Field(default_factory=list)
    steps: list[EnvStep] = Field(default_factory=list)
    env_calls: list[ModelCall] = Field(default_factory=list)
    """Model calls the host-served episode made itself (a simulated user, a judge), each
    with its ``caller``: costed apart from ``calls``, never in the agent's budget."""
    sandbox: SandboxRecord = Field(default_factory=SandboxRecord)

    def turns(self) -> list[dict[str, Any]]:
        """The runtime's ``turn`` events, in order."""
        return [e for e in self.events if e.get("event") == "turn"]

    def task_text(self) -> str:
        """The first user message the model was sent (the task as the harness put it)."""
        if not self.calls:
            return ""
        users = [m for m in self.calls[0].messages if m.get("role") == "user"]
        content = users[0].get("content") if users else ""
        return content if isinstance(content, str) else ""

    @classmethod
    def load(cls, data: dict[str, Any], where: str = "trajectory") -> Trajectory:
        """Validate a stored trajectory, upgrading older formats (0: no version, no steps;
        before 4 the version field was named ``format_version`` and there was no ``kind``)."""
        upgraded = dict(data)
        old = upgraded.pop("format_version", None)
        version = upgraded.get("version", old if old is not None else 0)
        if not isinstance(version, int) or version > TRAJECTORY_FORMAT:
            raise HarnessctlError(
                f"{where}: version {version!r} is newer than this harnessctl "
                f"understands ({TRAJECTORY_FORMAT}); upgrade harnessctl"
            )
        upgraded.update(kind="trajectory", version=TRAJECTORY_FORMAT)
        return cls.model_validate(upgraded)


# --- profiles ---------------------------------------------------------------------------------


class Rate(Record):
    """Successes out of rollouts, the rate and its 95% Wilson interval."""

    successes: int
    rollouts: int
    rate: float
    ci95: list[float]


class Spread(Record):
    """Mean, median, 90th percentile and maximum of one per-rollout number."""

    mean: float
    p50: float
    p90: float
    max: float


class RescuedTask(Record):
    """A task every base attempt failed that this harness solved at least once."""

    task: str
    category: str
    successes: int
    rollouts: int
    rate: float


class RescueCell(Record):
    """Base-failed (task, seed) pairs in one cell, and how many of them this harness won."""

    rescued: int
    of: int


class RescueEvidence(Record):
    """Paired evidence over every base-failed (task, seed): what the router scores."""

    base_failures: int
    rescued: int
    by_category: dict[str, RescueCell] = Field(default_factory=dict)
    by_outcome: dict[str, RescueCell] = Field(default_factory=dict)
    """Keyed by the *base's* failure outcome on the pair."""


class Rescue(Record):
    """What the harness rescues against the base (empty, with no evidence, for the base)."""

    opportunities: int
    """Tasks every base attempt failed."""
    count: int
    rate: float
    tasks: list[RescuedTask] = Field(default_factory=list)
    evidence: RescueEvidence | None = None
    """None for the base harness itself."""


class ProfileHarness(Record):
    """The profiled harness as its manifest names it."""

    name: str
    hash: str
    description: str = ""
    parent: str | None = None
    direction: str | None = None
    reproduction: dict[str, Any] | None = None
    """Its accepted edit's claimed rescues re-tested on fresh seeds and held-out tasks
    (``Reproduction.summary()`` of :mod:`harnessctl.evolve.reproduce`: claimed, tested,
    reproduced, fraction, fresh_seeds, held_out); None: no accepted edit with one."""


class ProfilePolicy(Record):
    """The policy the rollouts ran under: its id, model string and parameters (sorted)."""

    id: str
    model: str
    params: dict[str, Any] = Field(default_factory=dict)


class SuiteRef(Record):
    id: str
    name: str


class Card(Record):
    """The behavior card: the profile in words, for people and LLM voters."""

    summary: str = ""
    rescues: list[str] = Field(default_factory=list)
    fixes: list[str] = Field(default_factory=list)
    regresses: list[str] = Field(default_factory=list)
    costs: list[str] = Field(default_factory=list)

    def text(self, name: str) -> str:
        """The card as plain text (what LLM voters and ``profile`` output show)."""
        lines = [f"{name}: {self.summary}"]
        for key in ("fixes", "rescues", "costs", "regresses"):
            items: list[str] = getattr(self, key)
            if items:
                lines.append(f"  {key}: " + "; ".join(items))
        return "\n".join(lines)


class ReanchorInfo(Record):
    """How a ``reanchor`` profile was sampled (see docs/profiles.md)."""

    anchor_policy: str
    """The id of the policy the drift was measured against."""
    sample: list[str]
    """The re-run task ids, sorted."""


class Profile(Record):
    """One harness under one policy on one suite split (see docs/profiles.md)."""

    version: int = PROFILE_VERSION
    kind: Literal["full", "reanchor"] = "full"
    """``full``: every task of the split; ``reanchor``: a re-anchoring sample."""
    harness: ProfileHarness
    base: HarnessRef
    """The harness rescues and regressions are measured against (the lineage root)."""
    policy: ProfilePolicy
    suite: SuiteRef
    split: str
    tasks: int
    seeds: list[int]
    success: Rate
    categories: dict[str, Rate] = Field(default_factory=dict)
    outcomes: dict[str, int] = Field(default_factory=dict)
    """Rollouts per outcome; outcomes that never happened are left out."""
    steps: Spread
    tokens: Spread
    cost_usd: Spread
    latency_s: Spread
    rescue: Rescue
    regressed_tasks: list[str] = Field(default_factory=list)
    """Tasks the base solved on every attempt that this harness failed at least once."""
    per_task: dict[str, list[int]] = Field(default_factory=dict)
    """``[successes, rollouts]`` per task: what regression tests compare task by task."""
    card: Card | None = None
    """Set once the base's profile is known (``profiles.card.behavior_card``)."""
    reanchor: ReanchorInfo | None = None
    """Only on ``reanchor`` profiles."""

    @property
    def is_base(self) -> bool:
        return self.harness.hash == self.base.hash

    @property
    def name(self) -> str:
        return self.harness.name

    @classmethod
    def load(cls, data: Any, where: str = "profile") -> Profile:
        """Validate a stored profile (a YAML file, a store row, a pool file); ``where`` names
        it in the ConfigError a malformed or newer-version profile raises."""
        if not isinstance(data, dict):
            raise ConfigError(where, "not a harnessctl profile (expected a mapping)")
        version = data.get("version", PROFILE_VERSION)
        if not isinstance(version, int) or version > PROFILE_VERSION:
            raise ConfigError(
                f"{where}: version",
                f"profile version {version!r} is newer than this harnessctl "
                f"understands ({PROFILE_VERSION}); upgrade harnessctl",
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            from .harness import format_validation_error

            raise format_validation_error(where, exc) from None

    def dump(self) -> dict[str, Any]:
        """The plain-data form written to YAML, the store and pools: nested ``None`` values
        stay (``parent: null``), a missing ``card``, ``reanchor`` or harness ``reproduction``
        is left out."""
        data = self.model_dump(mode="json")
        for key in ("card", "reanchor"):
            if data[key] is None:
                del data[key]
        if data["harness"].get("reproduction") is None:
            del data["harness"]["reproduction"]
        return data


class RescueMatrix(Record):
    """The pool's rescue sets side by side: complementarity shows as a union larger than
    any single set."""

    harnesses: list[str]
    """Non-base harnesses, sorted."""
    overlap: dict[str, dict[str, int]]
    """Rescued tasks two harnesses share (the diagonal: a harness's own count)."""
    unique: dict[str, list[str]]
    """Tasks only this harness rescues."""
    union: list[str]
    union_size: int
    largest_single: int


__all__ = [
    "PROFILE_VERSION",
    "TRAJECTORY_FORMAT",
    "Card",
    "EnvStep",
    "ModelCall",
    "Profile",
    "ReanchorInfo",
    "RescueEvidence",
    "RescueMatrix",
    "Trajectory",
]
