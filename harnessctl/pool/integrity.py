"""Checksums of an exported pool: every file but the checksum file itself."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..errors import HarnessctlError

CHECKSUMS = "SHA256SUMS"
MANIFEST = "pool.json"


class PoolIntegrityError(HarnessctlError):
    """A pool file is missing, extra or altered; ``path`` names it. A failed check: exit 1."""

    exit_code = 1

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


def _files(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.name != CHECKSUMS
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_checksums(root: Path) -> None:
    lines = [f"{sha256(root / rel)}  {rel}\n" for rel in _files(root)]
    (root / CHECKSUMS).write_text("".join(lines), encoding="utf-8")


def verify_pool(root: Path) -> list[str]:
    """Every problem found (empty when the pool is intact); see :func:`check_pool`."""
    problems = []
    sums_path = root / CHECKSUMS
    if not sums_path.is_file():
        return [f"{sums_path}: missing checksum file"]
    expected: dict[str, str] = {}
    for line in sums_path.read_text(encoding="utf-8").splitlines():
        digest, _, rel = line.partition("  ")
        expected[rel] = digest
    present = set(_files(root))
    for rel in sorted(set(expected) - present):
        problems.append(f"{root / rel}: missing")
    for rel in sorted(present - set(expected)):
        problems.append(f"{root / rel}: not in {CHECKSUMS} (added after export)")
    for rel in sorted(present & set(expected)):
        if sha256(root / rel) != expected[rel]:
            problems.append(f"{root / rel}: checksum mismatch (modified after export)")
    return problems


def check_pool(root: Path) -> None:
    """Raise :class:`PoolIntegrityError` naming the first bad file."""
    problems = verify_pool(root)
    if problems:
        path, _, message = problems[0].partition(": ")
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PoolIntegrityError(path, message + more)
