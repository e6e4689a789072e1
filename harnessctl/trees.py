"""Harness trees: what a harness directory is, where it is hashed and where it is copied.

One rule everywhere (the content hash, the copy into either sandbox, evolve's child and its
git commit, a pool's export and its load), so that the hash is exactly what crosses:

- a tree holds **regular files and directories only**. Anything else (a symlink, to a file
  or to a directory; a FIFO, a socket, a device) is refused with a :class:`ConfigError`
  naming its path (exit 2). Nothing is ever followed: every directory and file is opened
  with ``O_NOFOLLOW`` relative to its parent's descriptor and checked on the descriptor;
- :data:`EXCLUDED_DIRS` (caches of Python tools, git's metadata) and names ending in
  :data:`EXCLUDED_SUFFIXES` (compiled bytecode) are not part of the tree, whatever they
  are: neither hashed nor copied, never looked into;
- a copy (:func:`copy_tree`) writes exactly the bytes it hashed, and refuses when they no
  longer hash to the harness's identity.

Kept apart from :mod:`harnessctl.harness` so that environments can hash their own code
without importing the harness module (which imports them).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, HarnessctlError

EXCLUDED_DIRS = frozenset({"__pycache__", ".git", ".pytest_cache", ".mypy_cache"})
"""Names that are not part of a tree (a file or a directory of that name is skipped)."""
EXCLUDED_SUFFIXES = (".pyc", ".pyo")
"""Compiled bytecode: Python writes it, a sandbox never gets it (it could hold code that no
source shows)."""
# the earlier names, still imported by callers
IGNORED_DIRS = EXCLUDED_DIRS
IGNORED_SUFFIXES = EXCLUDED_SUFFIXES

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_RULE = "a harness tree holds regular files and directories only; nothing is followed"


@dataclass(frozen=True)
class TreeFile:
    """One file of a tree: its ``/``-separated path, the owner's executable bit, its bytes."""

    rel: str
    executable: bool
    data: bytes


def excluded(name: str) -> bool:
    """Whether an entry called ``name`` is left out of every tree."""
    return name in EXCLUDED_DIRS or name.endswith(EXCLUDED_SUFFIXES)


def _kind(mode: int) -> str:
    for test, what in (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return what
    return "not a regular file or directory"


def _refuse(path: Path, what: str) -> ConfigError:
    return ConfigError(str(path), f"{what}: {_RULE}")


def _open_at(dir_fd: int, name: str, flags: int, path: Path) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:  # replaced by a link (ELOOP, ENOTDIR) or gone since it was listed
        raise _refuse(path, f"cannot be opened without following a link ({exc.strerror})") from None


def _read_dir(dir_fd: int, path: Path, prefix: str, out: list[TreeFile]) -> None:
    with os.scandir(dir_fd) as entries:
        listed = sorted(entries, key=lambda e: e.name)
    for entry in listed:
        if excluded(entry.name):
            continue
        where = path / entry.name
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            sub = _open_at(dir_fd, entry.name, _DIR_FLAGS, where)
            try:
                _read_dir(sub, where, f"{prefix}{entry.name}/", out)
            finally:
                os.close(sub)
        elif stat.S_ISREG(mode):
            fd = _open_at(dir_fd, entry.name, _FILE_FLAGS, where)
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise _refuse(where, _kind(st.st_mode))
                with os.fdopen(os.dup(fd), "rb") as fh:
                    data = fh.read()
            finally:
                os.close(fd)
            out.append(TreeFile(prefix + entry.name, bool(st.st_mode & stat.S_IXUSR), data))
        else:
            raise _refuse(where, _kind(mode))


def read_tree(root: Path | str) -> list[TreeFile]:
    """Every file of the tree at ``root``, sorted by path; a ``ConfigError`` names the first
    entry that is neither a regular file nor a directory (a symlink, FIFO, socket, device)."""
    root = Path(root)
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise ConfigError(str(root), f"cannot open the harness tree: {exc.strerror}") from None
    files: list[TreeFile] = []
    try:
        _read_dir(top, root, "", files)
    finally:
        os.close(top)
    return sorted(files, key=lambda f: f.rel)


def hash_files(files: Iterable[TreeFile]) -> str:
    """sha256 over (relative path, executable bit, content hash) of every file, in order."""
    digest = hashlib.sha256()
    for f in files:
        executable = "x" if f.executable else "-"
        content = hashlib.sha256(f.data).hexdigest()
        digest.update(f"{f.rel}\0{executable}\0{content}\n".encode())
    return digest.hexdigest()


def tree_hash(root: Path | str) -> str:
    """The content hash of the tree at ``root`` (see :func:`hash_files`)."""
    return hash_files(read_tree(root))


def harness_files(root: Path | str) -> list[Path]:
    """The paths of the files that make up the tree at ``root``, sorted (see :func:`read_tree`)."""
    return [Path(root) / f.rel for f in read_tree(root)]


def write_tree(files: Iterable[TreeFile], dest: Path) -> None:
    """Create ``dest`` (it must not exist) holding exactly ``files``."""
    dest = Path(dest)
    dest.mkdir(parents=True)
    for f in files:
        target = dest.joinpath(*f.rel.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o755 if f.executable else 0o644
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(f.data)
        os.chmod(target, mode)  # whatever the umask: the executable bit is in the hash


def copy_tree(src: Path | str, dest: Path, expect: str | None = None) -> str:
    """Copy the tree at ``src`` to ``dest`` (which must not exist): the bytes that are
    hashed are the bytes written, nothing else. Returns the content hash; with ``expect``,
    a tree that no longer hashes to it is refused (``HarnessctlError``, nothing written)."""
    files = read_tree(src)
    digest = hash_files(files)
    if expect is not None and digest != expect:
        raise HarnessctlError(
            f"{src}: the harness tree changed since it was loaded (its hash was "
            f"{expect[:12]}, it is {digest[:12]} now); nothing copied: load it again"
        )
    write_tree(files, dest)
    return digest
