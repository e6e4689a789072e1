"""Task list files: which of tau2-bench's tasks a suite runs.

The tasks themselves come from tau2's package, by tau2's own loader; a suite's task file only
selects them (YAML)::

    domain: airline      # airline, retail or telecom
    split: base          # one of tau2's own splits of the domain (default: base)
    ids: ["0", "3"]      # optional: tau2 task ids; default: every task of the split

A directory is every ``*.yaml`` in it, in name order. A file that fails a check (not YAML, an
unknown domain or split, an id the split does not hold) becomes a ``TaskProblem`` naming the
file and the field; the other files still load.

A task's id is ``<domain>-<tau2 id>`` (characters outside ``[A-Za-z0-9_.-]`` folded, long
ids cut and suffixed with a hash); its category is the domain and tau2's reward basis, e.g.
``airline:communicate+db``. Its record (host only) holds tau2's whole task, gold included.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml

from harnessctl.envs import Task, TaskProblem, TaskSet

from .package import DOMAINS, domain_splits, domain_tasks

KIND = "tau2"
DEFAULT_SPLIT = "base"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class TaskFileError(ValueError):
    """A task list file is wrong; ``str()`` is ``field: what is wrong``."""


def task_slug(domain: str, tau2_id: str) -> str:
    """The harnessctl id of tau2's task ``tau2_id`` of ``domain`` (stable, path-safe)."""
    slug = _UNSAFE.sub("_", tau2_id).strip("_")
    if slug != tau2_id or len(slug) > 40:
        slug = f"{slug[:40]}-{hashlib.sha1(tau2_id.encode()).hexdigest()[:8]}"
    return f"{domain}-{slug}"


def category(domain: str, task: dict[str, Any]) -> str:
    """``<domain>:<reward basis>``, the basis in lower case joined by ``+`` in name order."""
    criteria = task.get("evaluation_criteria") or {}
    basis = sorted(str(b).lower() for b in criteria.get("reward_basis") or [])
    return f"{domain}:{'+'.join(basis) or 'none'}"


def make_task(domain: str, split: str | None, task: dict[str, Any], source: str) -> Task:
    """A harnessctl task from tau2's task (as JSON) of ``domain``."""
    record = {"domain": domain, "split": split, "tau2_id": str(task["id"]), "task": task}
    blob = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return Task(
        id=task_slug(domain, str(task["id"])),
        env=KIND,
        category=category(domain, task),
        record=record,
        content_hash=hashlib.sha256(blob.encode()).hexdigest(),
        source=source,
    )


def _read_spec(path: Path) -> tuple[str, str, list[str] | None]:
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise TaskFileError(f"(file): not readable YAML ({exc})") from None
    if not isinstance(spec, dict):
        raise TaskFileError("(file): must be a mapping with domain, split and ids")
    unknown = sorted(set(spec) - {"domain", "split", "ids"})
    if unknown:
        raise TaskFileError(f"{unknown[0]}: unknown field (fields: domain, split, ids)")
    domain = spec.get("domain")
    if domain not in DOMAINS:
        raise TaskFileError(f"domain: must be one of {', '.join(DOMAINS)}, got {domain!r}")
    split = spec.get("split", DEFAULT_SPLIT)
    if not isinstance(split, str) or split not in domain_splits(domain):
        known = ", ".join(domain_splits(domain))
        raise TaskFileError(f"split: {domain} has the splits {known}, got {split!r}")
    ids = spec.get("ids")
    if ids is not None and (
        not isinstance(ids, list) or not all(isinstance(i, (str, int)) for i in ids)
    ):
        raise TaskFileError("ids: must be a list of tau2 task ids")
    return domain, split, None if ids is None else [str(i) for i in ids]


def load_file(path: Path) -> list[Task]:
    """The tasks one task list file selects; ``TaskFileError`` naming the field at fault."""
    domain, split, ids = _read_spec(path)
    tasks = {str(t.id): t for t in domain_tasks(domain, split)}
    for index, tau2_id in enumerate(ids or []):
        if tau2_id not in tasks:
            raise TaskFileError(f"ids[{index}]: {domain} split {split} has no task {tau2_id!r}")
    chosen = ids if ids is not None else list(tasks)
    return [make_task(domain, split, tasks[i].model_dump(mode="json"), f"{path}:1") for i in chosen]


def load_tasks(path: Path) -> TaskSet:
    """Every task the file (or the ``*.yaml`` files of the directory) at ``path`` selects."""
    path = Path(path)
    files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    result = TaskSet(tasks=[])
    if not files or not all(f.is_file() for f in files):
        result.problems.append(TaskProblem(str(path), 0, "no task list file found"))
        return result
    for file in files:
        try:
            result.tasks += load_file(file)
        except TaskFileError as exc:
            result.problems.append(TaskProblem(str(file), 1, str(exc)))
    return result
