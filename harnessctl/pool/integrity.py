"""Checks of an exported pool before anything in it is used: its shape (regular files and
directories only), the checksum of every file, the manifest as data, and that its id is the
id of what it freezes (:mod:`harnessctl.pool.identity`: trees and profiles).

A pool comes from elsewhere (a colleague, a download): nothing in it is followed or
imported. A symlink, FIFO, socket or device anywhere in it is a problem (nothing is read by
its name first); the manifest's harness names are plain names inside ``harnesses/`` and its
environment kinds plain names, which :mod:`harnessctl.pool.api` resolves through the
registry's known names only, never as an import path.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from ..errors import HarnessctlError
from .identity import file_sha256 as sha256
from .identity import identity_problems

CHECKSUMS = "SHA256SUMS"
MANIFEST = "pool.json"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")  # a harness name (harness.NAME_RE)
KIND_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")
"""An environment kind as a pool may name it: a plain name, never ``module:attr``."""
ROLES = ("base", "aux")


class PoolIntegrityError(HarnessctlError):
    """A pool file is missing, extra, altered or not plain data; ``path`` names it. A failed
    check: exit 1."""

    exit_code = 1

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


def _walk(root: Path) -> tuple[list[str], list[str]]:
    """(regular files but the checksum file, problems): every other non-directory entry is a
    problem, and no link is followed."""
    files, problems = [], []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = here / name
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode):
                continue
            if stat.S_ISREG(mode):
                rel = path.relative_to(root).as_posix()
                if rel != CHECKSUMS:
                    files.append(rel)
                continue
            what = "a symlink" if stat.S_ISLNK(mode) else "a special file"
            problems.append(f"{path}: {what}; a pool holds regular files and directories only")
    return sorted(files), problems


def write_checksums(root: Path) -> None:
    lines = [f"{sha256(root / rel)}  {rel}\n" for rel in _walk(root)[0]]
    (root / CHECKSUMS).write_text("".join(lines), encoding="utf-8")


def manifest_problems(where: str, manifest: Any) -> list[str]:
    """What makes ``pool.json`` (``where``) unusable as data: each problem names the field."""
    if not isinstance(manifest, dict):
        return [f"{where}: expected a JSON object"]
    entries = manifest.get("harnesses")
    if not isinstance(entries, list) or not entries:
        return [f"{where}: harnesses: expected a non-empty list"]
    problems, seen = [], set()
    for i, entry in enumerate(entries):
        field = f"harnesses[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: {field}: expected an object")
            continue
        name, kind = entry.get("name"), entry.get("env")
        if not isinstance(name, str) or not NAME_RE.match(name):
            problems.append(
                f"{where}: {field}.name: {name!r} is not a plain harness name (lowercase "
                "letters, digits, '.', '_' or '-'; no path)"
            )
        elif name in seen:
            problems.append(f"{where}: {field}.name: {name!r} appears twice")
        seen.add(name)
        if entry.get("role") not in ROLES:
            problems.append(f"{where}: {field}.role: {entry.get('role')!r} is not base or aux")
        if not isinstance(entry.get("hash"), str):
            problems.append(f"{where}: {field}.hash: missing")
        if kind is not None and not (isinstance(kind, str) and KIND_RE.match(kind)):
            problems.append(
                f"{where}: {field}.env: {kind!r} is not an environment kind name (a pool "
                "names kinds, never import paths)"
            )
    bases = [e for e in entries if isinstance(e, dict) and e.get("role") == "base"]
    if len(bases) != 1:
        problems.append(f"{where}: harnesses: {len(bases)} entries with role base, not 1")
    return problems


def verify_pool(root: Path) -> list[str]:
    """Every problem found (empty when the pool is intact); see :func:`check_pool`."""
    present, problems = _walk(root)
    if problems:  # nothing is read by name while a link or FIFO may stand in its place
        return problems
    sums_path = root / CHECKSUMS
    if not sums_path.is_file():
        return [f"{sums_path}: missing checksum file"]
    expected: dict[str, str] = {}
    for line in sums_path.read_text(encoding="utf-8").splitlines():
        digest, _, rel = line.partition("  ")
        expected[rel] = digest
    for rel in sorted(set(expected) - set(present)):
        problems.append(f"{root / rel}: missing")
    for rel in sorted(set(present) - set(expected)):
        problems.append(f"{root / rel}: not in {CHECKSUMS} (added after export)")
    for rel in sorted(set(present) & set(expected)):
        if sha256(root / rel) != expected[rel]:
            problems.append(f"{root / rel}: checksum mismatch (modified after export)")
    if problems or MANIFEST not in present:
        return problems or [f"{root / MANIFEST}: missing"]
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return [f"{root / MANIFEST}: not JSON ({exc})"]
    # resealed checksums pass the loop above: the manifest's own account must hold too
    return manifest_problems(str(root / MANIFEST), manifest) or identity_problems(root, manifest)


def check_pool(root: Path) -> None:
    """Raise :class:`PoolIntegrityError` naming the first bad file."""
    problems = verify_pool(root)
    if problems:
        path, _, message = problems[0].partition(": ")
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PoolIntegrityError(path, message + more)
