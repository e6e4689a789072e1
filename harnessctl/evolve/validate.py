"""Patch validation before any evaluation. Each failure has a reason code:

``no_blocks``/``bad_path`` (unparsable), ``out_of_scope`` (a file outside the direction),
``does_not_apply``, ``no_change`` (it applies and changes nothing: the parent again, whose
judgement could only spend rollouts), ``over_budget``, ``syntax_error``,
``invalid_manifest``, and, from the
engine, ``smoke_failed`` (the harness does not complete a smoke task in the sandbox).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from ..errors import ConfigError
from ..harness import HarnessSpec, load_harness
from ..trees import copy_tree, read_tree
from .directions import Direction
from .patch import PatchError, apply_blocks, changed_lines, parse_patch, unified_diff, write_files


class Rejected(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")


def scope_files(parent: HarnessSpec, direction: Direction) -> dict[str, str]:
    """Text of the parent's files the direction may edit."""
    out = {}
    for f in read_tree(parent.path):  # the files of the harness, as hashed: no link followed
        if direction.allows(f.rel):
            try:
                out[f.rel] = f.data.decode("utf-8")
            except UnicodeDecodeError:
                continue
    return out


def build_child(
    parent: HarnessSpec, direction: Direction, response: str, dest: Path, manifest_update: dict
) -> tuple[HarnessSpec, str, str]:
    """Validate ``response`` as a patch of ``parent`` and write the child to ``dest``.

    Returns (child spec, the patch as blocks text, unified diff)."""
    try:
        blocks = parse_patch(response)
    except PatchError as exc:
        raise Rejected(exc.reason, exc.message) from None
    outside = sorted({b.path for b in blocks if not direction.allows(b.path.strip())})
    if outside:
        raise Rejected(
            "out_of_scope",
            f"{', '.join(outside)} not in the direction's files ({', '.join(direction.files)})",
        )
    try:
        files = apply_blocks(parent.path, blocks)
    except PatchError as exc:
        raise Rejected(exc.reason, exc.message) from None
    changed = changed_lines(parent.path, files)
    if changed == 0:
        raise Rejected("no_change", "the blocks apply but change no line of the harness")
    if changed > direction.max_changed_lines:
        raise Rejected(
            "over_budget", f"{changed} changed lines > budget {direction.max_changed_lines}"
        )
    for rel, text in files.items():
        if rel.endswith(".py"):
            try:
                compile(text, rel, "exec")
            except SyntaxError as exc:
                raise Rejected("syntax_error", f"{rel}:{exc.lineno}: {exc.msg}") from None
    diff = unified_diff(parent.path, files)
    patch_text = "\n".join(
        f"{b.path}\n<<<<<<< SEARCH\n{b.search}=======\n{b.replace}>>>>>>> REPLACE" for b in blocks
    )
    if dest.exists():
        shutil.rmtree(dest)
    copy_tree(parent.path, dest, expect=parent.hash)  # the parent as hashed, nothing else
    write_files(dest, files)
    manifest_path = dest / "harness.yaml"
    try:
        data = yaml.safe_load(manifest_path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise Rejected("invalid_manifest", f"harness.yaml: {exc}") from None
    if not isinstance(data, dict):
        raise Rejected("invalid_manifest", "harness.yaml is not a mapping")
    data.update(manifest_update)
    manifest_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    try:
        child = load_harness(dest)
    except ConfigError as exc:
        raise Rejected("invalid_manifest", str(exc)) from None
    return child, patch_text, diff
