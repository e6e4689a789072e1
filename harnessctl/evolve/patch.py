"""SEARCH/REPLACE patches: the one edit format every editor produces.

A patch is a sequence of blocks::

    harness.py
    <<<<<<< SEARCH
    exact existing text
    =======
    replacement text
    >>>>>>> REPLACE

The path line names a file relative to the harness directory. An empty SEARCH creates the
file (it must not exist yet). Each SEARCH must match the current text exactly once.
Applying is all-or-nothing: a patch is applied to copies in memory and only written when
every block matched.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

BLOCK = re.compile(
    r"^(?P<path>[^\n`<>=]+?)[ \t]*\n(?:```[^\n]*\n)?<<<<<<< SEARCH[ \t]*\n(?P<search>.*?)"
    r"^=======[ \t]*\n(?P<replace>.*?)^>>>>>>> REPLACE[ \t]*$",
    re.S | re.M,
)


class PatchError(Exception):
    """The patch cannot be parsed or applied; ``reason`` is a short machine-readable code."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        self.message = message
        super().__init__(f"{reason}: {message}")


@dataclass(frozen=True)
class Block:
    path: str
    search: str
    replace: str


def parse_patch(text: str) -> list[Block]:
    """All SEARCH/REPLACE blocks in ``text`` (an editor's reply may hold prose around them)."""
    blocks = []
    for m in BLOCK.finditer(text):
        path = m.group("path").strip().strip("`").strip()
        blocks.append(Block(path=path, search=m.group("search"), replace=m.group("replace")))
    if not blocks:
        raise PatchError("no_blocks", "no SEARCH/REPLACE block found")
    return blocks


def _safe_relpath(path: str) -> str:
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise PatchError("bad_path", f"{path!r} is not a path inside the harness")
    return p.as_posix()


def apply_blocks(root: Path, blocks: list[Block]) -> dict[str, str]:
    """New contents of every touched file (relative path -> text), nothing written yet."""
    files: dict[str, str | None] = {}
    for block in blocks:
        rel = _safe_relpath(block.path)
        if rel not in files:
            target = root / rel
            files[rel] = target.read_text(encoding="utf-8") if target.is_file() else None
        current = files[rel]
        if block.search.strip() == "":
            if current is not None:
                raise PatchError("does_not_apply", f"{rel}: empty SEARCH but the file exists")
            files[rel] = block.replace
            continue
        if current is None:
            raise PatchError("does_not_apply", f"{rel}: no such file")
        count = current.count(block.search)
        if count != 1:
            what = "not found" if count == 0 else f"found {count} times"
            first = block.search.strip().splitlines()[0][:80]
            raise PatchError("does_not_apply", f"{rel}: SEARCH text {what} ({first!r} ...)")
        files[rel] = current.replace(block.search, block.replace, 1)
    return {k: v for k, v in files.items() if v is not None}


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def changed_lines(root: Path, files: dict[str, str]) -> int:
    """Lines added plus removed, over every touched file."""
    total = 0
    for rel, new in files.items():
        target = root / rel
        old = target.read_text(encoding="utf-8") if target.is_file() else ""
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
            if line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
                total += 1
    return total


def unified_diff(root: Path, files: dict[str, str]) -> str:
    out: list[str] = []
    for rel, new in sorted(files.items()):
        target = root / rel
        old = target.read_text(encoding="utf-8") if target.is_file() else ""
        out.extend(
            difflib.unified_diff(
                old.splitlines(True), new.splitlines(True), fromfile=f"a/{rel}", tofile=f"b/{rel}"
            )
        )
    return "".join(out)


def render_blocks(blocks: list[Block]) -> str:
    return "\n".join(
        f"{b.path}\n<<<<<<< SEARCH\n{b.search}=======\n{b.replace}>>>>>>> REPLACE\n" for b in blocks
    )
