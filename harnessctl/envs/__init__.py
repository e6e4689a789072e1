"""Environment plugins: how a kind of task is loaded, acted on and scored.

An environment turns task files into ``Task`` objects, writes a task's *public* material into
the directory the sandbox sees (``prepare``), owns the harness's action surface, scores the
episode (``score``, host only, with the gold labels), and describes a task in full to offline
simulated policies (``oracle``, host only, handed over only while such a policy runs).

The action surface comes in two forms:

- *in-sandbox* (``surface = "sandbox"``): the state is files the runtime acts on, through the
  environment's own stdlib-only package (:class:`SandboxCode`), e.g. DBBench's SQLite file;
- *host-served* (``surface = "host"``): an :class:`Episode` object on the host, reached by the
  harness through the rollout's gateway socket and token (reset, step); gold and simulator
  state never leave the host, every step is recorded, a crash is an infrastructure error.

Kinds are resolved by one registry (:mod:`harnessctl.registry`): the builtins ``dbbench``
and ``alfworld``,
plugins registered in-process with ``register_environment``, the entry point group
``harnessctl.environments``, or a dotted path ``package.module:Class``. See
docs/environments.md for how to write one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from harnessctl.errors import ConfigError
from harnessctl.registry import Registry

ENTRY_POINT_GROUP = "harnessctl.environments"


@dataclass(frozen=True)
class Task:
    """One task of a task file. ``record`` holds the gold labels: it never leaves the host."""

    id: str  # stable: f"{file_stem}-{index:03d}", index = 0-based record order in the file
    env: str  # the environment kind, e.g. "dbbench"
    category: str  # e.g. "INSERT", "UPDATE", "counting", "aggregation-SUM"
    # The full record, gold labels included: HOST ONLY. Left out of repr (so logs and
    # tracebacks do not spill labels) and of ==/hash (content_hash stands for it).
    record: dict[str, Any] = field(compare=False, repr=False)
    content_hash: str  # sha256 hex of the record as canonical JSON (sort_keys, compact)
    source: str  # "path:line", line 1-based


@dataclass(frozen=True)
class TaskProblem:
    """A record that could not be loaded; ``message`` names the field path at fault."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


@dataclass
class TaskSet:
    """The tasks that loaded, and the problems of those that did not."""

    tasks: list[Task]
    problems: list[TaskProblem] = field(default_factory=list)

    def by_id(self) -> dict[str, Task]:
        """The tasks keyed by id."""
        return {t.id: t for t in self.tasks}


@dataclass(frozen=True)
class Score:
    """The host-side verdict on one episode."""

    success: bool
    answer_unparsable: bool = False  # the final answer has no readable form (-> invalid_format)
    detail: dict[str, Any] = field(default_factory=dict)  # expected/actual, parsed answer, why


@dataclass(frozen=True)
class SandboxCode:
    """An in-sandbox environment's own code: a stdlib-only package the sandbox copies, read
    only, next to the runtime, importable there as ``package``. It must define
    ``open_tools(task_dir, runtime) -> dict[name, tool]`` (a tool has ``run(argument, limit)``
    returning ``runtime.Observation``). Its content hash is part of the rollout cache key of
    this environment's rollouts only."""

    package: str  # the importable name in the sandbox, e.g. "hxenv_dbbench"
    path: Path  # the package directory on the host

    @property
    def version(self) -> str:
        from harnessctl.trees import tree_hash

        return tree_hash(self.path)[:12]


@dataclass
class StepResult:
    """One answer of a host-served episode. ``observation`` and ``info`` reach the harness, so
    they must hold nothing gold; ``info["error"]`` marks a step the environment rejected."""

    observation: str
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Episode(Protocol):
    """A host-served environment's state for one rollout. It lives on the host; the harness
    reaches it through the gateway (``reset``, ``step``), every step recorded in the trajectory.
    An exception raised here is an infrastructure error of the rollout (retried), never the
    harness's failure."""

    def reset(self) -> StepResult:
        """Start the episode (a harness may call it again to restart); the first observation."""
        ...

    def step(self, tool: str, argument: str, arguments: dict[str, Any] | None) -> StepResult:
        """Take one action: a text ``argument`` or function-call ``arguments`` for ``tool``."""
        ...

    def close(self) -> None:
        """Release what the episode holds (a simulator process, a container)."""
        ...


@runtime_checkable
class Environment(Protocol):
    """What every environment kind provides (see the module docstring).

    Optional members, read with ``getattr``: ``surface`` (``"sandbox"``, the default, or
    ``"host"``); for in-sandbox kinds ``sandbox_code`` (a :class:`SandboxCode`); for
    host-served kinds ``tools`` (the action names the harness gets), ``max_steps`` (the
    per-rollout step budget) and ``open_episode(task, seed) -> Episode``; ``max_calls`` and
    ``max_tokens`` (the gateway's per-rollout default budgets, when 40 calls and 60,000
    tokens are too few for the kind's episodes); ``version`` (a string
    that changes when scoring or episodes change: part of the cache key); ``directions`` (a
    directory of repair directions, with rule-based repairs under ``repairs/``); ``replay``
    (``replay(task) -> list[dict]``, the gold action script for the ``replay/<kind>`` policy).
    """

    kind: str

    def load_tasks(self, path: Path) -> TaskSet:
        """Read a task file or directory; broken records become problems, the rest still load."""
        ...

    def prepare(self, task: Task, workdir: Path) -> None:
        """Write the task's public material (no gold labels) into ``workdir``."""
        ...

    def score(
        self, task: Task, workdir: Path, answer: str | None, episode: Episode | None = None
    ) -> Score:
        """Score the final state (``workdir`` or the host ``episode``) and the final answer."""
        ...

    def oracle(self, task: Task) -> dict[str, Any]:
        """Everything about the task, gold included, for offline simulated policies."""
        ...


def surface(env: Environment) -> str:
    """``"host"`` for a host-served environment, ``"sandbox"`` otherwise."""
    return "host" if getattr(env, "surface", "sandbox") == "host" else "sandbox"


def runtime_binding(env: Environment) -> dict[str, Any]:
    """What the sandboxed runtime is told about the environment (``HXRT_ENV``): no gold."""
    if surface(env) == "host":
        return {"kind": env.kind, "surface": "host", "tools": list(getattr(env, "tools", []))}
    code: SandboxCode | None = getattr(env, "sandbox_code", None)
    binding: dict[str, Any] = {"kind": env.kind, "surface": "sandbox"}
    if code is not None:
        binding["package"] = code.package
    return binding


def env_version(env: Environment) -> str:
    """The environment's part of a rollout's cache key: its declared version and, for an
    in-sandbox kind, the hash of its sandbox code."""
    parts = [env.kind, str(getattr(env, "version", "") or "")]
    code: SandboxCode | None = getattr(env, "sandbox_code", None)
    if code is not None:
        parts.append(code.version)
    return ":".join(parts)


ENVIRONMENTS: Registry[Environment] = Registry(
    ENTRY_POINT_GROUP,
    "environment kind",
    {
        "dbbench": "harnessctl.envs.dbbench:DBBenchEnvironment",
        "alfworld": "harnessctl.envs.alfworld:AlfworldEnvironment",
    },
    option="env",
)


def register_environment(kind: str, factory: Callable[[], Environment]) -> None:
    """Register an environment kind in this process (tests, embedding applications)."""
    ENVIRONMENTS.register(kind, factory)


def known_environments() -> list[str]:
    """Every kind that ``get_environment`` can resolve by name."""
    return ENVIRONMENTS.names()


def get_environment(kind: str, **options: Any) -> Environment:
    """Resolve an environment kind (short name, entry point or ``module:Class``) to a fresh
    instance built with ``options`` (a suite's ``env_options``). Raises ``ConfigError`` naming
    the kind and the known ones when nothing matches; bad options raise the environment's own
    ``TypeError``/``ValueError``.
    """
    env = ENVIRONMENTS.create(kind, **options)
    if not isinstance(env, Environment):
        raise ConfigError("env", f"{kind!r} does not provide the Environment interface")
    if surface(env) == "host" and not callable(getattr(env, "open_episode", None)):
        raise ConfigError("env", f"{kind!r} is host-served but has no open_episode(task, seed)")
    return env


__all__ = [
    "ENTRY_POINT_GROUP",
    "ENVIRONMENTS",
    "Environment",
    "Episode",
    "SandboxCode",
    "StepResult",
    "env_version",
    "runtime_binding",
    "surface",
    "Score",
    "Task",
    "TaskProblem",
    "TaskSet",
    "get_environment",
    "known_environments",
    "register_environment",
]
