"""Content hashes of directory trees: a harness's identity, an environment's sandbox code.

Kept apart from :mod:`harnessctl.harness` so that environments can hash their own code
without importing the harness module (which imports them).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from .errors import ConfigError

IGNORED_DIRS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache"}
IGNORED_SUFFIXES = (".pyc", ".pyo")


def harness_files(root: Path) -> list[Path]:
    """Files that make up a harness, sorted; symlinks and special files are refused."""
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.endswith(IGNORED_SUFFIXES):
                continue
            mode = path.lstat().st_mode
            if not stat.S_ISREG(mode):
                raise ConfigError(str(path), "harness trees may hold regular files only")
            files.append(path)
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def tree_hash(root: Path) -> str:
    """sha256 over (relative path, executable bit, content hash) of every file."""
    digest = hashlib.sha256()
    for path in harness_files(root):
        rel = path.relative_to(root).as_posix()
        executable = "x" if path.stat().st_mode & stat.S_IXUSR else "-"
        content = hashlib.sha256(path.read_bytes()).hexdigest()
        digest.update(f"{rel}\0{executable}\0{content}\n".encode())
    return digest.hexdigest()
