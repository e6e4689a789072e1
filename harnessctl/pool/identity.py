"""A pool's id and what it covers: every frozen harness tree and every frozen profile's split
and content (issue #56).

The id was a hash of the harness trees alone, so a pool of test-split profiles and one of
train-split profiles of the same harnesses had one id, while their routers read different
evidence. From manifest version 3 each harness entry's ``profile`` records the frozen file's
``split`` and ``sha256``, the id is a hash over those with the tree hashes, and
:func:`identity_problems` (run by ``pool verify`` and ``Pool.load``) checks each profile file
against its entry and recomputes the id.

Older manifests (versions 1 and 2) stay readable: their id is recomputed by the rule they
were written under (the trees only) and checked as such; ``pool verify`` says that their id
does not cover their profiles (the checksums still do).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..errors import HarnessctlError

SCHEMA_VERSION = 3
"""The pool manifest's format (``version`` in pool.json; 1 named it ``schema_version``;
3: the id covers the frozen profiles, and each entry's ``profile`` has ``split`` and
``sha256``)."""
PROFILED_ID_VERSION = 3
"""The first manifest version whose id covers its profiles."""


def manifest_version(manifest: dict[str, Any], where: str) -> int:
    """A pool manifest's format version (under its old name too); ``HarnessctlError`` for
    one newer than this harnessctl reads or not an integer."""
    version = _version(manifest)
    if version is None or version > SCHEMA_VERSION:
        raise HarnessctlError(
            f"{where}: pool version {version!r} is not one this harnessctl reads "
            f"(1..{SCHEMA_VERSION}); upgrade harnessctl"
        )
    return version


def _version(manifest: dict[str, Any]) -> Any:
    version = manifest.get("version", manifest.get("schema_version"))
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pool_id(entries: list[dict[str, Any]]) -> str:
    """The id of a pool that freezes ``entries`` (pool.json's ``harnesses``): each tree's
    ``hash`` with its ``profile``'s ``split`` and ``sha256`` (``-`` for a harness frozen
    without a profile). Order-free: the same trees and profiles give the same id."""
    lines = []
    for entry in entries:
        profile = entry.get("profile") or {}
        lines.append(f"{entry['hash']} {profile.get('split', '-')} {profile.get('sha256', '-')}")
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16]


def trees_pool_id(hashes: list[str]) -> str:
    """The id of a manifest of version 1 or 2: the harness trees only."""
    return hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()[:16]


def covers_profiles(manifest: dict[str, Any]) -> bool:
    """Whether the manifest's id covers its profiles (version 3 on)."""
    version = _version(manifest)
    return version is not None and version >= PROFILED_ID_VERSION


def identity_problems(root: Path, manifest: dict[str, Any]) -> list[str]:
    """What is wrong with ``pool.json``'s id and the profiles it freezes (the manifest has
    passed :func:`harnessctl.pool.integrity.manifest_problems`): each problem names the file
    and the field. A version this harnessctl does not read is left to
    :func:`manifest_version` (``Pool.load`` refuses it, naming the file)."""
    where = str(root / "pool.json")
    version = _version(manifest)
    if version is None or version > SCHEMA_VERSION:
        return []
    entries = manifest["harnesses"]
    if version < PROFILED_ID_VERSION:
        expected = trees_pool_id([e["hash"] for e in entries])
        problems = []
    else:
        problems = _profile_problems(root, entries, where)
        if problems:  # an id over altered profiles says nothing more
            return problems
        expected = pool_id(entries)
    stated = manifest.get("pool_id")
    if stated != expected:
        problems.append(
            f"{where}: pool_id: {stated!r} is not the id of what the pool freezes "
            f"({expected}); altered after export"
        )
    return problems


def _profile_problems(root: Path, entries: list[dict[str, Any]], where: str) -> list[str]:
    """Each frozen profile file against its entry's ``profile.split`` and ``profile.sha256``,
    and no profile file that no entry freezes."""
    problems: list[str] = []
    named = set()
    for i, entry in enumerate(entries):
        field = f"harnesses[{i}].profile"
        path = root / "profiles" / f"{entry['name']}.json"
        named.add(path.name)
        frozen = entry.get("profile")
        if frozen is None:
            if path.exists():
                problems.append(f"{path}: a profile pool.json does not freeze ({field} is null)")
            continue
        if not isinstance(frozen, dict) or not all(
            isinstance(frozen.get(k), str) for k in ("split", "sha256")
        ):
            problems.append(f"{where}: {field}: expected an object with split and sha256")
            continue
        if not path.is_file():
            problems.append(f"{path}: missing ({field} freezes it)")
            continue
        if file_sha256(path) != frozen["sha256"]:
            problems.append(
                f"{path}: content differs from {field}.sha256 in pool.json (altered after export)"
            )
            continue
        try:
            split = json.loads(path.read_text(encoding="utf-8")).get("split")
        except (UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
            problems.append(f"{path}: not a JSON profile ({exc})")
            continue
        if split != frozen["split"]:
            problems.append(
                f"{path}: split {split!r} is not {field}.split {frozen['split']!r} in pool.json"
            )
    profiles_dir = root / "profiles"
    if profiles_dir.is_dir():
        for path in sorted(profiles_dir.iterdir()):
            if path.name not in named:
                problems.append(f"{path}: not the profile of a harness pool.json names")
    return problems
