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

The same blocks may come as JSON, ``{"edits": [{"path": ..., "search": ..., "replace":
...}]}`` (the whole reply, or one fenced ```` ```json ```` block): the form an editor asked
for structured output answers in (``LLMEditor``'s ``edit_format=json``, decoded under a JSON
schema where the server supports it, so a small model cannot drift out of the format).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# One line of the grammar each: the parser matches lines, never a pattern across the reply,
# so it is linear in the reply's length (a regex over the whole text, with lazy bodies that
# backtrack, took seconds on a 100 KB reply with unclosed blocks).
_PATH = re.compile(r"[^\n`<>=]+")
_SEARCH = re.compile(r"<<<<<<< SEARCH[ \t]*")
_DIVIDER = re.compile(r"=======[ \t]*")
_REPLACE = re.compile(r">>>>>>> REPLACE[ \t]*")


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


def _next_index(lines: list[str], pattern: re.Pattern[str], closed: bool) -> list[int]:
    """For each line index i, the first index >= i whose line matches ``pattern`` in full
    (and, with ``closed``, is followed by a newline), else ``len(lines)``."""
    out = [len(lines)] * (len(lines) + 1)
    for i in range(len(lines) - 1, -1, -1):
        hit = pattern.fullmatch(lines[i]) and (not closed or i < len(lines) - 1)
        out[i] = i if hit else out[i + 1]
    return out


def parse_patch(text: str) -> list[Block]:
    """All SEARCH/REPLACE blocks in ``text`` (an editor's reply may hold prose around them).

    A block is a path line (no backtick, ``<``, ``>`` or ``=``), an optional fence line
    (```` ``` ````...), ``<<<<<<< SEARCH``, the search text up to the first ``=======`` line,
    the replacement up to the first ``>>>>>>> REPLACE`` line; the next block is looked for
    after it. Time and memory are linear in the length of ``text``."""
    lines = text.split("\n")  # lines[i] has a newline after it unless i is the last
    last = len(lines) - 1
    divider = _next_index(lines, _DIVIDER, closed=True)
    replace = _next_index(lines, _REPLACE, closed=False)

    def header(i: int) -> int | None:
        """The index of the SEARCH line of a block whose path line is ``i``, or None."""
        for j in (i + 1, i + 2):
            if j > last - 1:  # the SEARCH line needs a newline after it
                return None
            if _SEARCH.fullmatch(lines[j]):
                return j
            if j == i + 1 and not lines[j].startswith("```"):
                return None
        return None

    blocks, i = [], 0
    while i < last:
        path_line = lines[i]
        start = header(i) if _PATH.fullmatch(path_line) else None
        if start is None:
            i += 1
            continue
        mid = divider[start + 1]
        end = replace[mid + 1] if mid <= last else len(lines)
        if end > last:  # unclosed: no block starts here
            i += 1
            continue
        path = path_line.strip().strip("`").strip()
        search = "".join(line + "\n" for line in lines[start + 1 : mid])
        replacement = "".join(line + "\n" for line in lines[mid + 1 : end])
        blocks.append(Block(path=path, search=search, replace=replacement))
        i = end + 1
    if not blocks:
        blocks = json_blocks(text)
    if not blocks:
        raise PatchError("no_blocks", "no SEARCH/REPLACE block found")
    return blocks


#: The JSON form's schema (what ``LLMEditor`` asks a server to decode under).
EDITS_SCHEMA = {
    "type": "object",
    "properties": {
        "edits": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "search": {"type": "string"},
                    "replace": {"type": "string"},
                },
                "required": ["path", "search", "replace"],
            },
        }
    },
    "required": ["edits"],
}


def grounded_schema(files: dict[str, str]) -> dict:
    """The JSON form's schema held to ``files`` (path -> text): each edit's ``path`` one of
    them and its ``search`` one whole line of that file that the text holds exactly once
    (so it matches exactly once when applied), its indentation included; ``replace`` free."""
    choices = []
    for path, text in sorted(files.items()):
        body = text if text.endswith("\n") else text + "\n"
        lines = [
            line
            for line in dict.fromkeys(body.splitlines())
            if line.strip() and body.count(line + "\n") == 1  # as applying will match it
        ]
        if lines:
            choices.append(
                {
                    "type": "object",
                    "properties": {
                        "path": {"const": path},
                        "search": {"enum": lines},
                        "replace": {"type": "string"},
                    },
                    "required": ["path", "search", "replace"],
                }
            )
    if not choices:
        return EDITS_SCHEMA
    edits = {"type": "array", "minItems": 1, "items": {"anyOf": choices}}
    return {"type": "object", "properties": {"edits": edits}, "required": ["edits"]}


def json_blocks(text: str) -> list[Block]:
    """The blocks of a reply in the JSON form (module docstring), or [] when it is not one.
    Each text is taken as lines: a last line without its newline gets one, so that SEARCH
    text matches the file's lines as a block's would."""
    import json

    body = text.strip()
    fence = re.fullmatch(r"```(?:json)?[ \t]*\n(.*)\n```", body, re.S)
    if fence:
        body = fence.group(1)
    if not body.startswith("{"):
        return []
    try:
        data = json.loads(body)
    except ValueError:
        return []
    edits = data.get("edits") if isinstance(data, dict) else None
    if not isinstance(edits, list):
        return []

    def lines(value: str) -> str:
        return value if not value or value.endswith("\n") else value + "\n"

    blocks = []
    for edit in edits:
        if not isinstance(edit, dict):
            return []
        path, search, replace = edit.get("path"), edit.get("search"), edit.get("replace")
        if not (isinstance(path, str) and isinstance(search, str) and isinstance(replace, str)):
            return []
        blocks.append(Block(path=path.strip(), search=lines(search), replace=lines(replace)))
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
