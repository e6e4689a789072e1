"""Host-side file moves for the docker backend: task files in, the rollout's files out.

The files coming out were written by untrusted code, which may race the host while it reads
(until the container is gone): every file is opened with ``O_NOFOLLOW | O_NONBLOCK`` (a
symlink fails, a FIFO cannot block), checked to be a regular file on the open descriptor,
and read up to a bound. Only regular top-level files are copied.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

from ..bounds import TAIL_BYTES

MAX_FILE_BYTES = 256 * 1024 * 1024
SANDBOX_UID = 65534


def read_only_tree(root: Path) -> None:
    """World-readable, nobody-writable: the sandbox user reads it, cannot change it."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            os.chmod(Path(dirpath) / name, 0o444)
        os.chmod(dirpath, 0o555)


def _empty(directory: Path) -> bool:
    """Remove everything in ``directory`` (never following a link); whether it is empty."""
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
    return not os.listdir(directory)


def open_regular(path: Path) -> int | None:
    """A read-only descriptor of ``path`` if it is a regular file reached without following
    a symlink and without blocking (a FIFO or device is refused), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def read_tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a regular file the sandbox could write, as text."""
    fd = open_regular(path)
    if fd is None:
        return ""
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, limit, max(0, size - limit)).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def copy_in(src: Path, dst: Path) -> bool:
    """Reset ``dst`` (the container's /task) to a copy of the prepared task directory;
    False (and nothing copied) when what a rollout left there could not all be removed."""
    if not _empty(dst):
        return False
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
    return True


def copy_out(src: Path, dst: Path) -> None:
    """Copy the regular top-level files the rollout left in ``src`` over ``dst``."""
    for entry in os.scandir(src):
        fd = open_regular(Path(entry.path))
        if fd is None:
            continue
        target = dst / entry.name
        try:
            if target.is_symlink() or target.is_dir() or os.fstat(fd).st_size > MAX_FILE_BYTES:
                continue
            with open(target, "wb") as fout:
                left = MAX_FILE_BYTES  # the file may still grow while it is read
                while left > 0 and (chunk := os.read(fd, min(left, 1024 * 1024))):
                    fout.write(chunk)
                    left -= len(chunk)
        except OSError:
            continue
        finally:
            os.close(fd)
