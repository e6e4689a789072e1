"""The ``null`` editor: edits that change no behaviour, to measure false acceptance.

A TEST DOUBLE of an editor, not a repair: every proposal is a comment, an unused
module-level name, or trailing whitespace on a prompt line, so the child behaves exactly as
its parent. Judged by the same rule as any edit, an accepted null edit is a false acceptance;
``benchmarks/null_edits.py`` counts them (docs/decisions.md, "Certified acceptance").

The kind rotates with each proposal (``comment``, ``alias``, ``whitespace``); a kind whose
file is outside the direction's scope falls back to a comment in ``harness.py``. Each edit
carries a counter, so no two children of one parent share a tree (each is judged afresh).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .editors import EditContext, Proposal, render_prompt

NULL_HEADER = "null editor (offline, not an LLM; changes no behaviour): "
KINDS = ("comment", "alias", "whitespace")
_TOP_LEVEL = re.compile(r"^(def|class|async def) \w+")


@dataclass
class NullEditor:
    """Proposes behaviour-neutral SEARCH/REPLACE patches (see the module docstring)."""

    name: str = "null"
    identity: str = "null#1"
    count: int = 0
    kinds: tuple[str, ...] = KINDS
    proposed: list[str] = field(default_factory=list)

    def propose(self, ctx: EditContext, feedback: str | None) -> Proposal | None:
        self.count += 1
        kind = self.kinds[(self.count - 1) % len(self.kinds)]
        patch = null_patch(ctx.files, kind, f"{ctx.direction.name}-{self.count}")
        if patch is None and kind != "comment":
            kind, patch = "comment", null_patch(ctx.files, "comment", f"n{self.count}")
        if patch is None:
            return None
        self.proposed.append(kind)
        response = f"{NULL_HEADER}{kind}\n\n{patch}"
        return Proposal(self.name, render_prompt(ctx), response)


def null_patch(files: dict[str, str], kind: str, tag: str) -> str | None:
    """One SEARCH/REPLACE block of ``kind`` over ``files`` (the direction's editable files),
    or None where ``files`` offers no place for it."""
    if kind == "whitespace":
        for rel in sorted(r for r in files if r.startswith("prompts/")):
            line = _unique_line(files[rel], lambda s: bool(s.strip()))
            if line is not None:  # trailing spaces: the model reads the prompt's words alike
                return _block(rel, line, line + "  ")
        return None
    text = files.get("harness.py")
    if text is None:
        return None
    anchor = _unique_line(text, lambda s: bool(_TOP_LEVEL.match(s)))
    if anchor is None:
        return None
    safe = re.sub(r"\W", "_", tag)
    inserted = f"# null edit {tag}" if kind == "comment" else f"_NULL_EDIT_{safe} = None"
    return _block("harness.py", anchor, f"{inserted}\n\n\n{anchor}")


def _unique_line(text: str, ok) -> str | None:
    """The first line that ``ok`` accepts and that occurs once in ``text`` (so the SEARCH
    matches exactly once), outside any triple-quoted string."""
    lines = text.splitlines()
    quotes = 0
    for line in lines:
        if quotes % 2 == 0 and ok(line) and text.count(line) == 1 and f"{line}\n" in text:
            return line
        quotes += line.count('"""') + line.count("'''")
    return None


def _block(path: str, search: str, replace: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def null_editor(*, workspace=None, family: str = "", params: dict | None = None) -> NullEditor:
    """The ``null`` editor (``--editor null``): the registry's factory."""
    return NullEditor()
