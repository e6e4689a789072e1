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

Every kind subclasses :class:`Environment` (typed settings with defaults, four required
methods) and, when host-served, returns :class:`Episode` subclasses; ``get_environment``
refuses anything else, naming the kind.

Kinds are resolved by one registry (:mod:`harnessctl.registry`): the builtins ``dbbench``,
``alfworld`` and ``miniwob`` (``os_interaction`` and ``tau2`` come by entry points),
plugins registered in-process with ``register_environment``, the entry point group
``harnessctl.environments``, or a dotted path ``package.module:Class``. See
docs/environments.md for how to write one.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harnessctl.constants import DEFAULT_MAX_CALLS, DEFAULT_MAX_STEPS, DEFAULT_MAX_TOKENS
from harnessctl.errors import ConfigError
from harnessctl.registry import Registry
from harnessctl.runtime.wire import StepResult

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
class ModelReply:
    """A model's answer to a :meth:`ModelAccess.complete` call: the text, the function calls
    in the OpenAI shape (``{id, type: "function", function: {name, arguments}}``, arguments a
    JSON string), the usage and its cost in USD (0 when the price is unknown)."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    model: str = ""


#: What ``purpose`` may be: a short lowercase name (``user``, ``judge``); the call is recorded
#: under the caller ``env:<purpose>``.
PURPOSE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


class ModelAccess(ABC):
    """A host-served episode's way to call a model (a simulated user, a judge), handed to it
    by the rollout session as :attr:`Episode.models` before the first reset.

    Each call goes through the gateway's one entry point (litellm models and offline test
    doubles alike) on the host and is recorded in the rollout's trajectory (``env_calls``) and
    call log under the caller ``env:<purpose>``, with its tokens and cost, apart from the
    agent's: it never counts against the agent's call or token budget. Credentials in
    ``params`` (``api_key``...) reach the provider only; the records hold them redacted. A
    call that fails (the provider keeps failing, refuses the request) raises, which makes it
    an infrastructure error of the rollout, as any exception of the episode."""

    @abstractmethod
    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        purpose: str,
        model: str,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> ModelReply:
        """Call ``model`` (a litellm model string) with OpenAI-shaped ``messages`` and
        function ``tools``; ``params`` are litellm's (sampling settings, ``api_base``...)."""


def check_purpose(purpose: str) -> str:
    """``purpose`` checked (:data:`PURPOSE_CHARS`, 1-32 characters): ``ValueError`` else."""
    if not (0 < len(purpose) <= 32 and set(purpose) <= PURPOSE_CHARS):
        raise ValueError(f"purpose must be a short name (a-z, 0-9, _, -), got {purpose!r}")
    return purpose


class Episode(ABC):
    """A host-served environment's state for one rollout (subclass it). It lives on the host;
    the harness reaches it through the gateway (``reset``, ``step``), every request recorded
    in the trajectory as an :class:`harnessctl.records.EnvStep`. An exception raised here is
    an infrastructure error of the rollout (retried), never the harness's failure.

    ``models`` is the rollout's :class:`ModelAccess`, set by the rollout session after
    ``open_episode`` and before the first ``reset``; None where no session set it (an episode
    driven directly, in a test)."""

    models: ModelAccess | None = None

    @abstractmethod
    def reset(self) -> StepResult:
        """Start the episode (a harness may call it again to restart); the first observation."""

    @abstractmethod
    def step(self, tool: str, argument: str, arguments: dict[str, Any] | None) -> StepResult:
        """Take one action: a text ``argument`` or function-call ``arguments`` for ``tool``."""

    def close(self) -> None:  # noqa: B027 - most episodes hold nothing to release
        """Release what the episode holds (a simulator process, a container)."""


ReplayScript = list[dict[str, Any]]
"""A ``replay/<kind>`` script: one step per model turn, each ``{"text": reply in the text
protocol, "tool_call": {"name", "arguments"}}``."""


class Environment(ABC):
    """The base every environment kind subclasses, built-in or plugin (see the module
    docstring and docs/environments.md). The class attributes below are the contract's
    settings, each with its default; the four abstract methods are required, the others have
    defaults. The registry refuses an object that is not an ``Environment``.
    """

    kind: str = ""
    """The kind's name in suites and the registry (e.g. ``"dbbench"``); required."""
    surface: Literal["sandbox", "host"] = "sandbox"
    """``"sandbox"``: the state is files the runtime acts on (see ``sandbox_code``);
    ``"host"``: an :class:`Episode` on the host, opened by ``open_episode``."""
    sandbox_code: SandboxCode | None = None
    """An in-sandbox kind's own stdlib-only package (its hash is in the cache key)."""
    tools: tuple[str, ...] = ()
    """A host-served kind's action names, the tools the harness gets."""
    max_steps: int = DEFAULT_MAX_STEPS
    """Environment steps per rollout (host-served); the gateway refuses more."""
    max_calls: int = DEFAULT_MAX_CALLS
    """The gateway's default model calls per rollout for this kind's episodes."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    """The gateway's default prompt+completion tokens per rollout for this kind."""
    version: str = ""
    """An extra salt of the cache identity (the kind's sources and :meth:`outcome_inputs`
    already are in it): bump it for what neither shows, e.g. a tool outside the package."""
    directions: Path | None = None
    """A directory of repair directions, with the rule-based editor's repairs in ``repairs/``."""

    @abstractmethod
    def load_tasks(self, path: Path) -> TaskSet:
        """Read a task file or directory; broken records become problems, the rest still load."""

    @abstractmethod
    def prepare(self, task: Task, workdir: Path) -> None:
        """Write the task's public material (no gold labels) into ``workdir``."""

    @abstractmethod
    def score(
        self, task: Task, workdir: Path, answer: str | None, episode: Episode | None = None
    ) -> Score:
        """Score the final state (``workdir`` or the host ``episode``) and the final answer."""

    @abstractmethod
    def oracle(self, task: Task) -> dict[str, Any]:
        """Everything about the task, gold included, for offline simulated policies."""

    def open_episode(self, task: Task, seed: int) -> Episode:
        """A fresh episode for one rollout; a host-served kind must override it."""
        raise ConfigError("env", f"{self.kind!r} is not host-served: it opens no episodes")

    def replay(self, task: Task) -> ReplayScript | None:
        """The gold as a script for the ``replay/<kind>`` policy; None: the kind has none."""
        return None

    def task_from_record(self, record: dict[str, Any], task_id: str | None = None) -> Task:
        """A task from one raw record (one line of a task file; the Pool API's input). The
        default takes the record as it is, its category from ``category`` (else ``task``);
        override it to check records (raise ``ConfigError`` naming the field)."""
        blob = json.dumps(record, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(blob.encode()).hexdigest()
        category = record.get("category")
        return Task(
            id=task_id or f"task-{digest[:10]}",
            env=self.kind,
            category=category if isinstance(category, str) and category else "task",
            record=record,
            content_hash=digest,
            source="<record>",
        )

    def runtime_binding(self) -> dict[str, Any]:
        """What the sandboxed runtime is told about the environment (``HXRT_ENV``): no gold."""
        if self.surface == "host":
            return {"kind": self.kind, "surface": "host", "tools": list(self.tools)}
        binding: dict[str, Any] = {"kind": self.kind, "surface": "sandbox"}
        if self.sandbox_code is not None:
            binding["package"] = self.sandbox_code.package
        return binding

    def outcome_inputs(self) -> dict[str, str]:
        """What decides this kind's outcomes besides its package's files and the task record,
        as stable identities (a task image's id, an outside rule table's hash); part of the
        cache identity. The default has none."""
        return {}

    def cache_version(self) -> str:
        """The environment's part of a rollout's cache key (docs/environments.md): the kind,
        the ``version`` salt, the content hash of the kind's own package (its sources and the
        data inside it, verdict rules included: :func:`package_identity`), the hash of
        :meth:`outcome_inputs` and, for an in-sandbox kind, its sandbox code's hash. A changed
        verdict therefore never serves an outcome cached under the old one."""
        parts = [self.kind, str(self.version or ""), package_identity(type(self), self.directions)]
        inputs = self.outcome_inputs()
        if inputs:
            blob = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
            parts.append(hashlib.sha256(blob.encode()).hexdigest()[:12])
        if self.sandbox_code is not None:
            parts.append(self.sandbox_code.version)
        return ":".join(parts)


_identities: dict[tuple[str, str], str] = {}
_identities_lock = threading.Lock()


def package_root(cls: type) -> Path | None:
    """Where an environment class's code lives: the directory of the package that holds its
    module (``harnessctl/envs/os_interaction/`` for the builtin, a plugin's own package), or
    the module's file when it is a top-level module (never the folder it sits in, which may
    be site-packages). None when the module has no file (defined interactively)."""
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    spec = getattr(module, "__spec__", None)
    is_package = spec is not None and spec.submodule_search_locations is not None
    if is_package or getattr(module, "__package__", None):
        return path.parent
    return path


def _hash_tree(root: Path, skip: Path | None) -> str:
    """sha256 over (relative path, content) of every regular file under ``root``, less the
    trees' excluded names (caches, compiled bytecode) and ``skip``; links are not followed
    and other special files are left out (they hold no source)."""
    from harnessctl.trees import excluded

    digest = hashlib.sha256()
    if root.is_file():
        digest.update(root.name.encode() + b"\0" + root.read_bytes())
        return digest.hexdigest()
    for top, dirs, files in os.walk(root):  # os.walk does not follow links to directories
        here = Path(top)
        dirs[:] = sorted(d for d in dirs if not excluded(d) and here / d != skip)
        for name in sorted(files):
            path = here / name
            if excluded(name) or path.is_symlink() or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            digest.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def package_identity(cls: type, directions: Path | None = None) -> str:
    """The content hash (12 hex) of an environment class's package (:func:`package_root`),
    computed once per process. Its repair directions are left out: they steer the editor,
    never an outcome. ``""`` when the class has no file."""
    root = package_root(cls)
    if root is None:
        return ""
    skip = Path(directions).resolve() if directions is not None else None
    key = (str(root), str(skip))
    with _identities_lock:
        if key not in _identities:
            _identities[key] = _hash_tree(root, skip)[:12]
        return _identities[key]


def _check(kind: str, env: object) -> Environment:
    """``env`` if it fulfils the contract; ``ConfigError`` naming ``kind`` and the fault."""
    if not isinstance(env, Environment):
        raise ConfigError(
            "env",
            f"{kind!r} is a {type(env).__name__}, not a harnessctl.envs.Environment: an "
            "environment kind subclasses that base (docs/environments.md)",
        )
    if not env.kind:
        raise ConfigError("env", f"{kind!r} does not set its kind")
    if env.surface not in ("sandbox", "host"):
        raise ConfigError("env", f"{kind!r}: surface must be 'sandbox' or 'host'")
    if env.surface == "host":
        if type(env).open_episode is Environment.open_episode:
            raise ConfigError("env", f"{kind!r} is host-served but has no open_episode")
        if not env.tools:
            raise ConfigError("env", f"{kind!r} is host-served but names no tools")
    for name in ("max_steps", "max_calls", "max_tokens"):
        value = getattr(env, name)  # the contract's own fields, by name
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError("env", f"{kind!r}: {name} must be a positive integer")
    return env


ENVIRONMENTS: Registry[Environment] = Registry(
    ENTRY_POINT_GROUP,
    "environment kind",
    {
        "dbbench": "harnessctl.envs.dbbench:DBBenchEnvironment",
        "alfworld": "harnessctl.envs.alfworld:AlfworldEnvironment",
        "miniwob": "harnessctl.envs.miniwob:MiniwobEnvironment",
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
    return _check(kind, ENVIRONMENTS.create(kind, **options))


__all__ = [
    "ENTRY_POINT_GROUP",
    "ENVIRONMENTS",
    "Environment",
    "Episode",
    "ModelAccess",
    "ModelReply",
    "ReplayScript",
    "SandboxCode",
    "Score",
    "StepResult",
    "Task",
    "TaskProblem",
    "TaskSet",
    "get_environment",
    "known_environments",
    "package_identity",
    "package_root",
    "register_environment",
]
