"""Reading AgentBench's OS-interaction task files, in AgentBench's layout as it is.

A task file is ``<root>/data/N/name.json`` (its scripts in ``<root>/scripts/N/``) or
``<root>/data/name.json`` (its scripts in ``<root>/scripts/name/``: ``data/dev.json`` ->
``scripts/dev/``); a JSON list of records (or one record), or JSON lines. ``load_tasks`` takes
the root, its ``data`` folder, a folder under it, or one file.

A record, as AgentBench reads it (``src/server/tasks/os_interaction/task.py``):

- ``description`` (the question); ``labels`` (the first is the task's category);
- ``create``: ``local`` (the image's name), ``init`` (a script or a list of scripts, run
  before the agent starts); a ``create`` that is not an object is read as AgentBench reads it
  (neither ``local`` nor ``init`` in it: the default image, no init);
- ``start``: a script started in the background, kept running for the episode;
- ``evaluation``: ``match`` (a string: the answer must equal it, stripped; or an object with
  ``answer`` or ``regex``) or ``check`` (a script or a list; ``null`` stands for the example
  script), and ``example`` (a script: its output is the expected value).

A script is a string (bash code), or an object with ``code`` or ``file`` (relative to the
scripts folder) and ``language`` (``bash``, the default, or ``python``). Every file is read
at load time (the record holds the code, so its hash covers it). A record that fails a check
is a ``TaskProblem`` naming the file, the record and the field; the others still load.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from harnessctl.envs import Task, TaskProblem, TaskSet

KIND = "os_interaction"
LANGUAGES = ("bash", "python")
Script = list[str]  # [language, code]


class RecordError(ValueError):
    """A record's field is wrong; ``str()`` is ``field: what is wrong``."""


def scripts_dir(task_file: Path) -> Path:
    """The scripts folder of a task file, by AgentBench's layout (see the module docstring)."""
    task_file = Path(task_file).resolve()
    for parent in task_file.parents:
        if parent.name == "data":
            rel = task_file.relative_to(parent)
            sub = rel.parent if rel.parent != Path(".") else Path(task_file.stem)
            return parent.parent / "scripts" / sub
    return task_file.parent / "scripts" / task_file.stem


def task_files(path: Path) -> list[Path]:
    """Every task file under ``path`` (or ``path`` itself), sorted."""
    path = Path(path)
    if path.is_file():
        return [path]
    base = path / "data" if (path / "data").is_dir() else path
    return sorted(p for p in base.rglob("*") if p.suffix in (".json", ".jsonl") and p.is_file())


def load_script(raw: Any, where: str, scripts: Path) -> Script:
    """A script object as ``[language, code]`` (``RecordError`` naming ``where``)."""
    if isinstance(raw, str):
        return ["bash", raw]
    if not isinstance(raw, dict):
        raise RecordError(f"{where}: expected a script (a string or an object with code/file)")
    language = raw.get("language", "bash")
    if language not in LANGUAGES:
        raise RecordError(f"{where}.language: {language!r} is not one of {', '.join(LANGUAGES)}")
    if "file" in raw:
        name = raw["file"]
        if not isinstance(name, str) or not name:
            raise RecordError(f"{where}.file: not a file name")
        file = (scripts / name).resolve()
        if scripts.resolve() not in file.parents:
            raise RecordError(f"{where}.file: {name!r} leaves the scripts folder {scripts}")
        try:
            return [language, file.read_text(encoding="utf-8")]
        except (OSError, UnicodeDecodeError) as exc:
            raise RecordError(f"{where}.file: cannot read {file}: {exc}") from None
    if "code" in raw:
        if not isinstance(raw["code"], str):
            raise RecordError(f"{where}.code: not a string")
        return [language, raw["code"]]
    raise RecordError(f"{where}: a script object needs code or file")


def _scripts(raw: Any, where: str, scripts: Path, allow_null: bool = False) -> list[Any]:
    items = raw if isinstance(raw, list) else [raw]
    out: list[Any] = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]" if isinstance(raw, list) else where
        if item is None and allow_null:
            out.append(None)
        else:
            out.append(load_script(item, at, scripts))
    return out


def parse_record(raw: Any, scripts: Path) -> dict[str, Any]:
    """A raw record as the environment's record (scripts read), or ``RecordError``."""
    if not isinstance(raw, dict):
        raise RecordError(f"(record): expected a JSON object, got {type(raw).__name__}")
    description = raw.get("description")
    if not isinstance(description, str) or not description.strip():
        raise RecordError("description: missing or not a non-empty string")
    create = raw.get("create")
    image, init = "default", []
    if isinstance(create, dict):
        image = create.get("local", "default")
        if not isinstance(image, str) or not image:
            raise RecordError("create.local: not an image name")
        if "init" in create:
            init = _scripts(create["init"], "create.init", scripts)
    start = load_script(raw["start"], "start", scripts) if "start" in raw else None
    evaluation = raw.get("evaluation")
    if not isinstance(evaluation, dict):
        raise RecordError("evaluation: missing or not an object")
    match: dict[str, str] | None = None
    check: list[Any] | None = None
    example: Script | None = None
    if "match" in evaluation:
        value = evaluation["match"]
        if isinstance(value, str):
            match = {"answer": value}
        elif isinstance(value, dict) and isinstance(value.get("answer"), str):
            match = {"answer": value["answer"]}
        elif isinstance(value, dict) and isinstance(value.get("regex"), str):
            match = {"regex": value["regex"]}
        else:
            raise RecordError("evaluation.match: a string, or an object with answer or regex")
    elif "check" in evaluation:
        check = _scripts(evaluation["check"], "evaluation.check", scripts, allow_null=True)
        if "example" in evaluation:
            example = load_script(evaluation["example"], "evaluation.example", scripts)
        if any(c is None for c in check) and example is None:
            raise RecordError(
                "evaluation.example: missing, but evaluation.check has null (the example's output)"
            )
    else:
        raise RecordError("evaluation: needs match or check")
    labels = raw.get("labels", [])
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise RecordError("labels: not a list of strings")
    return {
        "description": description,
        "image": image,
        "init": init,
        "start": start,
        "match": match,
        "check": check,
        "example": example,
        "labels": labels,
    }


def content_hash(record: dict[str, Any]) -> str:
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _raw_records(path: Path) -> list[tuple[int, Any]]:
    """(line, record) of a task file; ``RecordError`` when it is not JSON."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    out.append((n, json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise RecordError(f"(line {n}): not JSON: {exc.msg}") from None
        return out
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"(file): not JSON: {exc.msg} at line {exc.lineno}") from None
    items = data if isinstance(data, list) else [data]
    return [(1, item) for item in items]


def task_id(task_file: Path, index: int) -> str:
    """``<path under data/, without .json, / as .>.<index>``: ``dev.3``, ``1.find.0``."""
    task_file = Path(task_file).resolve()
    for parent in task_file.parents:
        if parent.name == "data":
            stem = task_file.relative_to(parent).with_suffix("")
            return ".".join(stem.parts) + f".{index}"
    return f"{task_file.stem}.{index}"


def load_tasks(path: Path) -> TaskSet:
    """Every record under ``path``; a broken one is a problem naming file, record and field."""
    tasks: list[Task] = []
    problems: list[TaskProblem] = []
    files = task_files(path)
    for file in files:
        scripts = scripts_dir(file)
        try:
            records = _raw_records(file)
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(TaskProblem(str(file), 0, f"(file): unreadable: {exc}"))
            continue
        except RecordError as exc:
            problems.append(TaskProblem(str(file), 0, str(exc)))
            continue
        for index, (line, raw) in enumerate(records):
            try:
                record = parse_record(raw, scripts)
            except RecordError as exc:
                problems.append(TaskProblem(str(file), line, f"[{index}].{exc}"))
                continue
            labels = record["labels"]
            tasks.append(
                Task(
                    id=task_id(file, index),
                    env=KIND,
                    category=labels[0] if labels else "task",
                    record=record,
                    content_hash=content_hash(record),
                    source=f"{file}:{line}",
                )
            )
    if not files:
        problems.append(TaskProblem(str(path), 0, "no task file (data/**/*.json) under this path"))
    return TaskSet(tasks, problems)
