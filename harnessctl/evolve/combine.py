"""All repairs combined: one harness that carries every sibling's change at once.

The equal-budget baselines (``harnessctl bench``) ask whether a pool of siblings is better
than the simplest use of the same repairs: one harness with all of them. Each sibling's
change from the base is merged in turn, file by file, with git's own three-way merge
(``git merge-file``: the base is the common ancestor, the harness built so far one side, the
sibling the other), and its ``harness.yaml`` settings key by key. A sibling whose change
conflicts with what is already merged, or whose merge no longer compiles, is left out
whole and named; the rest are kept. Round-2 siblings carry their round-1 parent's change,
which merges cleanly with itself.

The result lives under the workspace state (``.harnessctl/combined/``), never under
``harnesses/``: it is not one of the base's repairs and must not join its lineage (profiles,
the router and pools read the lineage). Its name carries a hash of its inputs, so the same
siblings always give the same harness and its rollouts are cached like any other's.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import HarnessctlError
from ..harness import HarnessSpec, load_harness
from ..trees import TreeFile, hash_files, read_tree, write_tree

MANIFEST = "harness.yaml"


@dataclass
class Combined:
    """The combined harness, and which siblings it holds or left out (and why)."""

    spec: HarnessSpec
    merged: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)


class _Conflict(Exception):
    pass


def _merge_text(ancestor: bytes, ours: bytes, theirs: bytes, rel: str) -> bytes:
    """git's three-way merge of one file; ``_Conflict`` when the two changes overlap."""
    import git  # gitpython (heavy import: only when combining)

    with tempfile.TemporaryDirectory(prefix="hxcombine-") as tmp:
        paths = []
        for name, data in (("ours", ours), ("base", ancestor), ("theirs", theirs)):
            path = Path(tmp) / name
            path.write_bytes(data)
            paths.append(str(path))
        try:
            merged = git.Git(tmp).merge_file(
                "-p", "-q", *paths, stdout_as_string=False, strip_newline_in_stdout=False
            )
        except git.GitCommandError as exc:
            raise _Conflict(f"{rel}: the changes overlap (git merge-file: {exc.status})") from None
    return merged


def _settings(data: bytes, where: str) -> dict:
    manifest = yaml.safe_load(data.decode("utf-8")) or {}
    if not isinstance(manifest, dict):
        raise HarnessctlError(f"{where}: harness.yaml is not a mapping")
    return dict(manifest.get("settings") or {})


def _merge_settings(ancestor: dict, ours: dict, theirs: dict) -> dict:
    out = dict(ours)
    for key in set(ancestor) | set(theirs):
        if theirs.get(key) == ancestor.get(key):
            continue  # the sibling did not change it
        if ours.get(key) not in (ancestor.get(key), theirs.get(key)):
            raise _Conflict(f"harness.yaml: settings.{key} changed two ways")
        if key in theirs:
            out[key] = theirs[key]
        else:
            out.pop(key, None)
    return out


def _merge_one(
    base: dict[str, bytes], ours: dict[str, bytes], sibling: dict[str, bytes]
) -> dict[str, bytes]:
    out = dict(ours)
    for rel in sorted((set(base) | set(sibling)) - {MANIFEST}):
        old, mine, new = base.get(rel), ours.get(rel), sibling.get(rel)
        if new in (old, mine):
            continue
        if new is None or old is None or mine is None:
            if mine != old:  # added or deleted by the sibling, changed here too
                raise _Conflict(f"{rel}: added or removed by one side, changed by the other")
            if new is None:
                out.pop(rel)
            else:
                out[rel] = new
            continue
        out[rel] = _merge_text(old, mine, new, rel)
        if rel.endswith(".py"):
            try:
                compile(out[rel], rel, "exec")
            except SyntaxError as exc:
                raise _Conflict(f"{rel}:{exc.lineno}: the merge does not compile") from None
    return out


def combine(base: HarnessSpec, siblings: list[HarnessSpec], dest_root: Path) -> Combined:
    """Merge every sibling's change from ``base`` into one harness under ``dest_root``."""
    tree = {f.rel: f for f in read_tree(base.path)}
    ancestor = {rel: f.data for rel, f in tree.items()}
    ancestor_settings = _settings(ancestor[MANIFEST], str(base.path))
    files, settings = dict(ancestor), dict(ancestor_settings)
    merged: list[str] = []
    left_out: dict[str, str] = {}
    for sib in siblings:
        theirs = {f.rel: f.data for f in read_tree(sib.path)}
        try:
            next_files = _merge_one(ancestor, files, theirs)
            next_settings = _merge_settings(
                ancestor_settings, settings, _settings(theirs[MANIFEST], str(sib.path))
            )
        except _Conflict as exc:
            left_out[sib.name] = str(exc)
            continue
        files, settings = next_files, next_settings
        merged.append(sib.name)
    inputs = hashlib.sha256(
        "\n".join([base.hash, *(f"{s.name}:{s.hash}" for s in siblings)]).encode()
    ).hexdigest()[:10]
    name = f"{base.name}.combined-{inputs}"
    manifest = yaml.safe_load(ancestor[MANIFEST].decode("utf-8"))
    manifest.update(
        name=name,
        description=f"All repairs combined: {', '.join(merged) or 'none merged'}.",
        parent=base.name,
        parent_hash=base.hash,
        direction="combined",
        settings=settings,
    )
    manifest.pop("edit_id", None)
    files[MANIFEST] = yaml.safe_dump(manifest, sort_keys=False).encode("utf-8")
    out = [
        TreeFile(rel, tree[rel].executable if rel in tree else False, data)
        for rel, data in sorted(files.items())
    ]
    dest = dest_root / name
    if not dest.is_dir() or hash_files(read_tree(dest)) != hash_files(out):
        if dest.exists():
            shutil.rmtree(dest)
        dest_root.mkdir(parents=True, exist_ok=True)
        write_tree(out, dest)
    return Combined(load_harness(dest), merged, left_out)
