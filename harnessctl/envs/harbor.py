"""What an environment kind gives Harbor (harborframework.com): its tasks as task folders.

A Harbor task folder holds ``instruction.md`` (what the agent is told), ``task.toml`` (schema
``1.4``: ``[task]``, free ``[metadata]``, ``[verifier]``, ``[agent]``, ``[environment]``),
``environment/`` (the task container's build context: a ``Dockerfile``), ``tests/`` (the
verifier: Harbor uploads it to ``/tests`` after the agent ran and runs ``/tests/test.sh``,
which writes a number to ``/logs/verifier/reward.txt``) and ``solution/`` (what Harbor's
oracle agent uploads to ``/solution`` and runs as ``/solution/solve.sh``); docs/harbor.md
names the sources in Harbor 0.26.

A kind that can be exported has a :class:`HarborExporter`, registered under its kind in
:data:`HARBOR_EXPORTERS` (built-ins by import path, plugins under the entry point group
``harnessctl.harbor_exporters``, as environment kinds register); its ``export_harbor(env,
task, context)`` returns the folder's content, a :class:`HarborTask`. ``harnessctl.harbor``
writes the folders of a suite's split (``harnessctl export-harbor``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from harnessctl.errors import ConfigError
from harnessctl.registry import Registry

from . import Environment, Task

SCHEMA_VERSION = "1.4"
"""``task.toml``'s ``schema_version`` in Harbor 0.26 (``TaskConfig``)."""
TESTS_DIR = "/tests"
SOLUTION_DIR = "/solution"
AGENT_LOGS = "/logs/agent"
VERIFIER_LOGS = "/logs/verifier"
REWARD_FILE = f"{VERIFIER_LOGS}/reward.txt"
ANSWER_FILE = f"{AGENT_LOGS}/answer.txt"
"""harnessctl's convention, not Harbor's: where an agent writes the final answer of a task
that asks a question (its whole text, less one final newline), for the verifier to read.
``/logs/agent`` is Harbor's agent folder (mounted from the trial's ``agent/`` folder)."""
ENTRY_POINT_GROUP = "harnessctl.harbor_exporters"


@dataclass
class HarborTask:
    """One task folder's content. Paths in the dicts are relative to their folder; a file
    whose name ends in ``.sh`` is written executable."""

    name: str
    """The folder's name (letters, digits, ``.``, ``_``, ``-``)."""
    instruction: str
    config: dict[str, Any]
    """``task.toml`` as data: tables are dicts; values strings, numbers, booleans or lists."""
    dockerfile: str
    tests: dict[str, str]
    """The verifier's files; ``test.sh`` is required."""
    solution: dict[str, str] = field(default_factory=dict)
    """The oracle's files (``solve.sh``); empty: no solution."""
    environment: dict[str, str] = field(default_factory=dict)
    """More files of the build context, beside the ``Dockerfile``."""
    caveats: list[str] = field(default_factory=list)
    """Where the folder cannot reproduce the native task exactly, in words (not written)."""


@dataclass(frozen=True)
class ExportContext:
    """What an exporter knows of the suite around a task."""

    suite: str
    """The suite's name (the ``org`` of Harbor's ``org/name`` task names)."""
    suite_id: str
    """``name@hash`` of the suite's task files and options."""
    split: str
    timeout_s: float
    """A rollout's wall-clock limit in the suite: the agent's timeout in Harbor."""
    attribution: str = ""
    """Where the tasks come from and their licence (the suite's ``attribution``)."""


class HarborExporter(ABC):
    """Turns tasks of one environment kind into Harbor task folders (subclass it and
    register it under the kind: :data:`HARBOR_EXPORTERS`)."""

    @abstractmethod
    def export_harbor(self, env: Environment, task: Task, context: ExportContext) -> HarborTask:
        """The task folder of ``task`` (gold included: the folder's ``tests/`` and
        ``solution/`` never reach the agent in Harbor), for the environment ``env`` built
        with the suite's options."""


HARBOR_EXPORTERS: Registry[HarborExporter] = Registry(
    ENTRY_POINT_GROUP,
    "Harbor exporter",
    {"os_interaction": "harnessctl.envs.os_interaction.harbor:OSHarborExporter"},
    option="env",
)


def exporter_for(kind: str, where: str = "env") -> HarborExporter:
    """The registered exporter of an environment kind; ``ConfigError`` at ``where`` (the
    suite's ``env`` field) when it has none."""
    if kind not in HARBOR_EXPORTERS.names():
        known = ", ".join(HARBOR_EXPORTERS.names()) or "none"
        raise ConfigError(
            where,
            f"environment {kind!r} cannot be exported to Harbor: no exporter is registered "
            f"for it (kinds that can: {known}; a plugin registers one under the entry point "
            f"group {ENTRY_POINT_GROUP})",
        )
    exporter = HARBOR_EXPORTERS.create(kind)
    if not isinstance(exporter, HarborExporter):
        raise ConfigError(where, f"the Harbor exporter of {kind!r} is not a HarborExporter")
    return exporter


__all__ = [
    "ANSWER_FILE",
    "HARBOR_EXPORTERS",
    "REWARD_FILE",
    "SCHEMA_VERSION",
    "ExportContext",
    "HarborExporter",
    "HarborTask",
    "exporter_for",
]
