"""Task suites: ``suite.yaml`` names an environment kind, task files, splits and an image.

Splits are declared, not stored as id lists, so they stay correct when task files grow:

* ``{}`` (no rule): every task of the suite;
* ``partition: {seed, fraction, stratify}``: a seeded sample. Tasks are grouped by category
  (``stratify: category``) or kept as one group (``stratify: none``); within a group they are
  ordered by ``sha256(f"{seed}:{task id}")`` and the first ``round(fraction * size)`` (halves
  rounded up) are taken. The same seed and ids always give the same split, and adding a task
  moves no other task across splits unless it changes its group's count;
* ``complement_of: <split>``: every task not in that split.

Without a ``splits`` key a suite has ``dev`` (all), ``train`` (partition seed 13, fraction
0.67, stratified by category) and ``test`` (complement of train).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .constants import DEFAULT_TIMEOUT_S
from .envs import Environment, Task, TaskProblem, TaskSet, get_environment
from .errors import ConfigError

SUITE_FILE = "suite.yaml"
DEFAULT_IMAGE = "harnessctl-runtime:latest"
_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class PartitionSpec(BaseModel):
    """A seeded, optionally stratified sample of the suite's tasks."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    seed: int = 13
    """Seed of the sample: the same seed always selects the same task ids."""
    fraction: float = Field(default=0.67, gt=0, lt=1)
    """Share of each group taken into the split: round(fraction * group size), halves up."""
    stratify: Literal["category", "none"] = "category"
    """Sample each task category separately (``category``) or the suite as a whole."""


class SplitSpec(BaseModel):
    """How a split selects its tasks: all of them, a partition, or a complement."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    partition: PartitionSpec | None = None
    """Take a seeded sample of the tasks (see ``PartitionSpec``)."""
    complement_of: str | None = None
    """Take every task that is not in the named split (which must not be a complement)."""

    @model_validator(mode="after")
    def _one_rule(self) -> SplitSpec:
        if self.partition is not None and self.complement_of is not None:
            raise ValueError("give either partition or complement_of, not both")
        return self


def _default_splits() -> dict[str, SplitSpec]:
    return {
        "dev": SplitSpec(),
        "train": SplitSpec(partition=PartitionSpec()),
        "test": SplitSpec(complement_of="train"),
    }


class SuiteConfig(BaseModel):
    """The content of ``suite.yaml``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(pattern=_NAME)
    """Short name of the suite, used in run records and reports."""
    env: str
    """Environment kind that loads, prepares and scores the tasks (e.g. ``dbbench``)."""
    env_options: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the environment (e.g. DBBench's ``rules: v0.2``); they belong in
    its ``version``, so rollouts under other options are cached apart."""
    tasks: list[str] = Field(min_length=1)
    """Task files or directories (as the environment reads them: ALFWorld takes a directory
    of games), relative to the directory holding ``suite.yaml``."""
    splits: dict[str, SplitSpec] = Field(default_factory=_default_splits)
    """Named splits (see the module docstring); default: dev, train and test."""
    image: str = DEFAULT_IMAGE
    """Container image the docker sandbox backend runs rollouts in."""
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    """Wall-clock limit of one rollout, in seconds."""
    description: str = ""
    """What the suite is for, in a sentence or two."""
    attribution: str = ""
    """Where the tasks come from and under which licence."""


def _loc(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def partition(tasks: list[Task], spec: PartitionSpec) -> set[str]:
    """The ids of the tasks a partition selects (module docstring)."""
    groups: dict[str, list[Task]] = {}
    for task in tasks:
        key = task.category if spec.stratify == "category" else ""
        groups.setdefault(key, []).append(task)
    chosen: set[str] = set()
    for group in groups.values():
        ranked = sorted(
            group, key=lambda t: hashlib.sha256(f"{spec.seed}:{t.id}".encode()).hexdigest()
        )
        chosen.update(t.id for t in ranked[: math.floor(spec.fraction * len(group) + 0.5)])
    return chosen


class Suite:
    """A loaded suite: its configuration, its directory and its tasks."""

    def __init__(self, config: SuiteConfig, path: Path) -> None:
        self.config = config
        self.path = path  # the suite.yaml file
        self.root = path.parent

    @property
    def name(self) -> str:
        """The suite's name."""
        return self.config.name

    @property
    def image(self) -> str:
        """Container image for the docker backend."""
        return self.config.image

    @property
    def timeout_s(self) -> float:
        """Wall-clock limit of one rollout."""
        return self.config.timeout_s

    @property
    def split_names(self) -> list[str]:
        """The suite's splits, in declaration order."""
        return list(self.config.splits)

    @property
    def task_files(self) -> list[Path]:
        """The task files, resolved against the suite directory."""
        return [self.root / p for p in self.config.tasks]

    @cached_property
    def environment(self) -> Environment:
        """The environment that loads, prepares and scores this suite's tasks."""
        return configured_environment(self.config, self.path)

    @cached_property
    def id(self) -> str:
        """``name@hash``: the hash (12 hex) covers the task files' contents (a directory's
        files and their paths in it), in order, and the ``env_options`` when there are any
        (the same tasks scored otherwise are another suite)."""
        from .trees import tree_hash

        digest = hashlib.sha256()
        for file in self.task_files:
            if file.is_dir():
                digest.update(bytes.fromhex(tree_hash(file)))
            else:
                digest.update(hashlib.sha256(file.read_bytes()).digest())
        if self.config.env_options:
            options = json.dumps(self.config.env_options, sort_keys=True, default=str)
            digest.update(options.encode("utf-8"))
        return f"{self.name}@{digest.hexdigest()[:12]}"

    @cached_property
    def all_tasks(self) -> TaskSet:
        """Every task of every task file; ids must be unique across files."""
        tasks: list[Task] = []
        problems: list[TaskProblem] = []
        seen: dict[str, str] = {}
        for file in self.task_files:
            loaded = self.environment.load_tasks(file)
            for task in loaded.tasks:
                if task.id in seen:
                    raise ConfigError(
                        f"{self.path}: tasks",
                        f"task id {task.id!r} occurs at {seen[task.id]} and {task.source} "
                        "(task files need distinct names)",
                    )
                seen[task.id] = task.source
            tasks.extend(loaded.tasks)
            problems.extend(loaded.problems)
        return TaskSet(tasks=tasks, problems=problems)

    def _select(self, split: str) -> set[str]:
        spec = self.config.splits[split]
        everything = self.all_tasks.tasks
        if spec.partition is not None:
            return partition(everything, spec.partition)
        if spec.complement_of is not None:
            return {t.id for t in everything} - self._select(spec.complement_of)
        return {t.id for t in everything}

    def tasks(self, split: str = "dev") -> TaskSet:
        """The tasks of a split, in file order, with the load problems of the whole suite."""
        if split not in self.config.splits:
            available = ", ".join(self.config.splits)
            raise ConfigError(
                f"{self.path}: splits", f"unknown split {split!r} (available: {available})"
            )
        chosen = self._select(split)
        return TaskSet(
            tasks=[t for t in self.all_tasks.tasks if t.id in chosen],
            problems=list(self.all_tasks.problems),
        )


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read suite file: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(where, f"invalid YAML: {problem}") from exc
    if not isinstance(data, dict):
        raise ConfigError(str(path), "expected a mapping of suite settings")
    return data


def configured_environment(config: SuiteConfig, path: Path) -> Environment:
    """The suite's environment, built with its ``env_options``; bad options name the field."""
    try:
        return get_environment(config.env, **config.env_options)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: env_options", str(exc)) from None


def _check(config: SuiteConfig, path: Path) -> None:
    """The checks that need more than one field, or the file system."""
    for i, rel in enumerate(config.tasks):
        if not (path.parent / rel).exists():
            where = f"{path}: tasks[{i}]"
            raise ConfigError(where, f"no such task file or directory: {path.parent / rel}")
    for name, spec in config.splits.items():
        target = spec.complement_of
        if target is None:
            continue
        where = f"{path}: splits.{name}.complement_of"
        if target not in config.splits:
            raise ConfigError(where, f"unknown split {target!r}")
        if target == name or config.splits[target].complement_of is not None:
            raise ConfigError(where, f"{target!r} must be a split that is not a complement")
    try:
        get_environment(config.env)
    except ConfigError as exc:
        raise ConfigError(f"{path}: env", exc.message) from exc
    configured_environment(config, path)


def load_suite(path: Path | str) -> Suite:
    """Load a suite from its directory or its ``suite.yaml``; errors name file and field."""
    path = Path(path)
    if path.is_dir():
        path = path / SUITE_FILE
    if not path.is_file():
        raise ConfigError(str(path), "no such suite file")
    try:
        config = SuiteConfig.model_validate(_read_yaml(path))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = _loc(first["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        where = f"{path}: {field}" if field else str(path)
        raise ConfigError(where, first["msg"] + more) from exc
    _check(config, path)
    return Suite(config, path)
