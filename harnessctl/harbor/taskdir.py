"""A Harbor task folder on disk: :func:`write_task` writes a
:class:`harnessctl.envs.harbor.HarborTask` (the folder's content, which an environment's
exporter makes), ``task.toml`` by :func:`dumps_toml`. The format: :mod:`harnessctl.envs.harbor`
and docs/harbor.md.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from harnessctl.envs.harbor import HarborTask

MARKER = "task.toml"
"""What makes a folder a task folder (an export replaces only such folders)."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # a JSON string is a TOML basic string but for DEL, which TOML refuses raw
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)


def dumps_toml(data: dict[str, Any], _prefix: str = "") -> str:
    """``data`` as TOML: its plain values first, then each dict as a table (``[a.b]``)."""
    lines = [
        f"{_toml_key(k)} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)
    ]
    out = "\n".join(lines) + ("\n" if lines else "")
    for key, value in data.items():
        if isinstance(value, dict):
            header = f"{_prefix}.{_toml_key(key)}" if _prefix else _toml_key(key)
            out += f"\n[{header}]\n" + dumps_toml(value, header)
    return out


def _write_files(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ValueError(f"{rel!r} leaves its folder")
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if rel.endswith(".sh"):
            path.chmod(0o755)


def write_task(task: HarborTask, parent: Path) -> Path:
    """Write ``task`` as ``parent/<name>``, replacing a task folder of that name (one that
    holds ``task.toml``); ``FileExistsError`` for anything else there. The folder is written
    beside it first and moved into place, so an interrupted export leaves no half folder."""
    if not _NAME.match(task.name):
        raise ValueError(f"task folder name {task.name!r}: letters, digits, '.', '_', '-'")
    if "test.sh" not in task.tests:
        raise ValueError(f"task {task.name}: tests/test.sh is required")
    parent = Path(parent)
    folder = parent / task.name
    if folder.is_symlink() or (folder.exists() and not (folder / MARKER).is_file()):
        raise FileExistsError(f"{folder} exists and is not a task folder (no {MARKER})")
    staging = parent / f".{task.name}.writing"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    (staging / "instruction.md").write_text(task.instruction, encoding="utf-8")
    _write_files(staging / "environment", {"Dockerfile": task.dockerfile, **task.environment})
    _write_files(staging / "tests", task.tests)
    if task.solution:
        _write_files(staging / "solution", task.solution)
    (staging / MARKER).write_text(dumps_toml(task.config), encoding="utf-8")
    if folder.exists():
        shutil.rmtree(folder)
    staging.rename(folder)
    return folder
