"""Environment plugins: how a kind of task is loaded, laid out for the sandbox and scored.

An environment turns task files into ``Task`` objects, writes a task's *public* material into
the directory the sandbox sees (``prepare``), scores what the sandbox left there together with
the final answer (``score``, host only, with the gold labels), and describes a task in full to
offline simulated policies (``oracle``, host only).

Kinds are resolved by one registry: the builtin ``dbbench``, plugins registered in-process with
``register_environment``, the entry point group ``harnessctl.environments`` (loaded lazily,
the first time an unknown kind is asked for), or a dotted path ``package.module:Class``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from harnessctl.errors import ConfigError

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
    answer_unparsable: bool = False  # the final answer was not a list (-> invalid_format)
    detail: dict[str, Any] = field(default_factory=dict)  # expected/actual, parsed answer, why


@runtime_checkable
class Environment(Protocol):
    """What every environment kind provides (see the module docstring)."""

    kind: str

    def load_tasks(self, path: Path) -> TaskSet:
        """Read a task file; broken records become problems, the rest still load."""
        ...

    def prepare(self, task: Task, workdir: Path) -> None:
        """Write the task's public material (no gold labels) into ``workdir``."""
        ...

    def score(self, task: Task, workdir: Path, answer: str | None) -> Score:
        """Score the final state left in ``workdir`` and the final ``answer`` text."""
        ...

    def oracle(self, task: Task) -> dict[str, Any]:
        """Everything about the task, gold included, for offline simulated policies."""
        ...


_BUILTIN: dict[str, str] = {"dbbench": "harnessctl.envs.dbbench:DBBenchEnvironment"}
_registered: dict[str, Callable[[], Environment]] = {}


def register_environment(kind: str, factory: Callable[[], Environment]) -> None:
    """Register an environment kind in this process (tests, embedding applications)."""
    _registered[kind] = factory


def _load_object(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not attr:
        module_name, _, attr = target.rpartition(".")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _plugin_entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def known_environments() -> list[str]:
    """Every kind that ``get_environment`` can resolve by name."""
    return sorted({*_BUILTIN, *_registered, *_plugin_entry_points()})


def get_environment(kind: str) -> Environment:
    """Resolve an environment kind (short name or ``module:Class``) to a fresh instance.

    Raises ``ConfigError`` naming the kind and the known ones when nothing matches.
    """
    factory: Any
    if kind in _registered:
        factory = _registered[kind]
    elif kind in _BUILTIN:
        factory = _load_object(_BUILTIN[kind])
    else:
        plugins = _plugin_entry_points()
        if kind in plugins:
            factory = plugins[kind].load()
        elif ":" in kind:
            try:
                factory = _load_object(kind)
            except (ImportError, AttributeError) as exc:
                raise ConfigError("env", f"cannot load environment {kind!r}: {exc}") from exc
        else:
            known = ", ".join(known_environments())
            raise ConfigError("env", f"unknown environment kind {kind!r} (known: {known})")
    env = factory() if callable(factory) else factory
    if not isinstance(env, Environment):
        raise ConfigError("env", f"{kind!r} does not provide the Environment interface")
    return env


__all__ = [
    "ENTRY_POINT_GROUP",
    "Environment",
    "Score",
    "Task",
    "TaskProblem",
    "TaskSet",
    "get_environment",
    "known_environments",
    "register_environment",
]
