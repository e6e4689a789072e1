"""A suite's split as Harbor task folders (``harnessctl export-harbor``; docs/harbor.md).

What a task becomes in Harbor is its environment's to say, through the exporter registered
under its kind (:mod:`harnessctl.envs.harbor`); :func:`export_suite` writes one folder per
task and ``harnessctl-export.json``, the :class:`HarborExportResult` the command prints,
beside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from harnessctl.envs.harbor import ANSWER_FILE, ExportContext, exporter_for
from harnessctl.errors import ConfigError
from harnessctl.records import Record, Result

from .taskdir import write_task

if TYPE_CHECKING:
    from harnessctl.suite import Suite

MANIFEST = "harnessctl-export.json"


class ExportedTask(Record):
    id: str
    """The task's id in the suite."""
    folder: str
    """The task folder's name under ``out``."""
    caveats: list[str] = Field(default_factory=list)
    """Where the folder cannot reproduce the native task exactly."""


class HarborExportResult(Result):
    """``export-harbor --json``, also written as ``harnessctl-export.json`` in ``out``."""

    kind: Literal["export-harbor"] = "export-harbor"
    version: int = 1
    suite: str
    suite_id: str
    split: str
    env: str
    out: str
    answer_file: str = ANSWER_FILE
    """Where an agent writes its final answer in the exported tasks (docs/harbor.md)."""
    tasks: list[ExportedTask] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    """Task records of the suite that did not load (and so were not exported)."""


def export_suite(
    suite: Suite, split: str, out: Path, task_ids: list[str] | None = None
) -> HarborExportResult:
    """Write the tasks of ``split`` (or only ``task_ids`` of it) as Harbor task folders in
    ``out``. An unknown split or task id, an environment without an exporter, or a path in
    ``out`` that is not a task folder is a ``ConfigError`` naming it."""
    exporter = exporter_for(suite.config.env, f"{suite.path}: env")
    env = suite.environment
    loaded = suite.tasks(split)
    tasks = loaded.tasks
    if task_ids:
        by_id = loaded.by_id()
        missing = [t for t in task_ids if t not in by_id]
        if missing:
            raise ConfigError(
                "--task", f"not in split {split!r} of {suite.name}: {', '.join(missing)}"
            )
        tasks = [by_id[t] for t in dict.fromkeys(task_ids)]
    context = ExportContext(
        suite=suite.name,
        suite_id=suite.id,
        split=split,
        timeout_s=suite.timeout_s,
        attribution=suite.config.attribution,
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = HarborExportResult(
        suite=suite.name,
        suite_id=suite.id,
        split=split,
        env=suite.config.env,
        out=str(out),
        problems=[str(p) for p in loaded.problems],
    )
    for task in tasks:
        folder = exporter.export_harbor(env, task, context)
        try:
            write_task(folder, out)
        except FileExistsError as exc:
            raise ConfigError("--out", str(exc)) from None
        result.tasks.append(ExportedTask(id=task.id, folder=folder.name, caveats=folder.caveats))
    (out / MANIFEST).write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return result
