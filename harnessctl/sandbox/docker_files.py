"""Host-side file moves for the docker backend: task files in, the rollout's files out.

The files coming out were written by untrusted code: only regular top-level files are
copied, never through a symlink, and never more than a bounded amount.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

MAX_FILE_BYTES = 256 * 1024 * 1024
SANDBOX_UID = 65534


def read_only_tree(root: Path) -> None:
    """World-readable, nobody-writable: the sandbox user reads it, cannot change it."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            os.chmod(Path(dirpath) / name, 0o444)
        os.chmod(dirpath, 0o555)


def _empty(directory: Path) -> None:
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            os.unlink(entry.path)


def copy_in(src: Path, dst: Path) -> None:
    """Reset ``dst`` (the container's /task) to a copy of the prepared task directory."""
    _empty(dst)
    as_root = os.geteuid() == 0
    for dirpath, _dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        target = dst / rel
        if rel != Path("."):
            target.mkdir()
        for name in filenames:
            shutil.copy2(Path(dirpath) / name, target / name, follow_symlinks=False)
        if as_root:
            for name in [*filenames, "."]:
                os.chown(target / name, SANDBOX_UID, SANDBOX_UID, follow_symlinks=False)
        else:
            os.chmod(target, 0o777)
            for name in filenames:
                os.chmod(target / name, 0o666)


def copy_out(src: Path, dst: Path) -> None:
    """Copy the regular top-level files the rollout left in ``src`` over ``dst``."""
    for entry in os.scandir(src):
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        target = dst / entry.name
        if target.is_symlink() or target.is_dir():
            os.close(fd)
            continue
        with os.fdopen(fd, "rb") as fin, open(target, "wb") as fout:
            shutil.copyfileobj(fin, fout, length=1024 * 1024)
