"""Trajectory files: one gzip-compressed JSON document per rollout.

Files are written atomically (temporary file in the same folder, fsync, ``os.replace``) and
before the rollout row is committed, so a row never points at a missing or partial file. A
crash in between leaves at worst an orphan file, which is harmless.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import zlib
from pathlib import Path
from typing import Any

from harnessctl.errors import HarnessctlError

_COMPRESSLEVEL = 6  # level 9 costs several times the CPU for a few percent on JSON


def write_trajectory(path: Path, trajectory: Any) -> None:
    """Write ``trajectory`` (a :class:`harnessctl.records.Trajectory`, its plain form, or its
    JSON already checked: a read-through cache's) as gzip JSON to ``path`` atomically
    (creating parent folders)."""
    if hasattr(trajectory, "model_dump"):
        trajectory = trajectory.model_dump(mode="json")
    if isinstance(trajectory, bytes):
        payload = trajectory
    else:
        payload = json.dumps(trajectory, ensure_ascii=False, separators=(",", ":")).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw:
            # mtime=0: identical trajectories give identical bytes.
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=_COMPRESSLEVEL, mtime=0) as gz:
                gz.write(payload)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def read_trajectory(path: Path) -> dict[str, Any]:
    """Read a trajectory file; a missing or corrupt file raises HarnessctlError naming it."""
    try:
        with gzip.open(path, "rb") as gz:
            data = json.loads(gz.read().decode("utf-8"))
    except FileNotFoundError as exc:
        raise HarnessctlError(f"trajectory file {path}: missing") from exc
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HarnessctlError(f"trajectory file {path}: corrupt ({exc})") from exc
    if not isinstance(data, dict):
        raise HarnessctlError(f"trajectory file {path}: corrupt (not a JSON object)")
    return data
