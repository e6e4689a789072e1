"""The page as text: MiniWoB++'s DOM information (``core.getDOMInfo()``, the task page's own
function) rendered one element a line with its ref, and read back.

A line is ``<indent>[<ref>] <tag>[ #id][ .class ...][ "text"][ value="..."][ checked]
[ focused]``: two spaces of indent per level (the page's frame, ``body``, ``#wrap`` and
``#area``, is left out, its children shown in its place), the tag in lower case (an input
as ``input[type]``), strings as JSON. A text run that shares its parent with elements
(MiniWoB++'s pseudo-element ``t``, a negative ref) is a line of its own, ``"text"``, with
no ref: it cannot be clicked, its parent can. The ref is the number the agent clicks and
types into; refs are stable within an episode (the page keeps them on the elements) and
restart at each episode.

Standard library only: the simulated and replay policies read observations back with
:func:`parse_page`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

#: Text longer than this is cut in an element's line (a page can hold long paragraphs).
TEXT_LIMIT = 200
_LINE = re.compile(r"^(?P<indent> *)(?:\[(?P<ref>\d+)\] (?P<tag>[a-z0-9_\[\]-]+))?(?P<rest>.*)$")
_STRING = r'"(?:[^"\\]|\\.)*"'
_ID = re.compile(r"(?:^| )#(\S+)")
_CLASS = re.compile(r"(?:^| )\.(\S+)")


@dataclass
class Element:
    """One element as the agent sees it (read back from a rendered page)."""

    ref: int
    tag: str
    depth: int
    id: str = ""
    classes: tuple[str, ...] = ()
    text: str = ""
    value: str | None = None
    checked: bool = False
    focused: bool = False
    children: list[Element] = field(default_factory=list)
    parent: Element | None = field(default=None, repr=False)

    def all_text(self) -> str:
        """The element's own text and its descendants', joined by spaces."""
        parts = [self.text] + [c.all_text() for c in self.children]
        return " ".join(p for p in parts if p)


def _tag(node: dict[str, Any]) -> str:
    tag = str(node.get("tag") or "").lower()
    if tag.startswith("input_"):
        return f"input[{tag[len('input_') :]}]"
    return tag


def _clip(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 3] + "..."


def _line(node: dict[str, Any], depth: int) -> str:
    parts = [f"[{int(node['ref'])}] {_tag(node)}"]
    if node.get("id"):
        parts.append("#" + "".join(str(node["id"]).split()))
    classes = node.get("classes")
    if isinstance(classes, str):
        parts += ["." + c for c in classes.split()]
    if node.get("text"):
        parts.append(json.dumps(_clip(node["text"]), ensure_ascii=False))
    value = node.get("value")
    if isinstance(value, bool):
        if value:
            parts.append("checked")
    elif value is not None:
        parts.append("value=" + json.dumps(_clip(str(value)), ensure_ascii=False))
    if node.get("focused"):
        parts.append("focused")
    return "  " * depth + " ".join(parts)


#: The page's frame around the task: left out, its children shown in its place.
FRAME_IDS = ("wrap", "area")


def render_page(root: dict[str, Any]) -> str:
    """The DOM information of ``core.getDOMInfo()`` as text (see the module docstring)."""
    lines: list[str] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        if int(node.get("ref", 0)) < 0:
            if node.get("text"):
                lines.append("  " * depth + json.dumps(_clip(node["text"]), ensure_ascii=False))
            return
        if node.get("id") in FRAME_IDS or str(node.get("tag")).upper() == "BODY":
            for child in node.get("children") or []:
                walk(child, depth)
            return
        lines.append(_line(node, depth))
        for child in node.get("children") or []:
            walk(child, depth + 1)

    walk(root, 0)
    return "\n".join(lines)


def parse_page(text: str) -> list[Element]:
    """The elements of a rendered page (:func:`render_page`), in document order, each with
    its parent and children; lines that are not page lines are skipped."""
    elements: list[Element] = []
    stack: list[Element] = []
    for raw in text.splitlines():
        match = _LINE.match(raw)
        if match is None:
            continue
        depth = len(match.group("indent")) // 2
        rest = match.group("rest").strip()
        strings = re.findall(_STRING, rest)
        if match.group("ref") is None:
            # a text run: belongs to the element above it at a lower depth
            if rest.startswith('"') and strings and rest == strings[0]:
                while stack and stack[-1].depth >= depth:
                    stack.pop()
                if stack:
                    stack[-1].text = " ".join(
                        p for p in (stack[-1].text, json.loads(strings[0])) if p
                    )
            continue
        value_match = re.search(r"value=(" + _STRING + ")", rest)
        value = json.loads(value_match.group(1)) if value_match else None
        bare = re.sub(r"value=" + _STRING, "", rest)
        texts = re.findall(_STRING, bare)
        plain = re.sub(_STRING, "", bare)
        element = Element(
            ref=int(match.group("ref")),
            tag=match.group("tag"),
            depth=depth,
            id=(_ID.search(plain) or [None, ""])[1] or "",
            classes=tuple(_CLASS.findall(plain)),
            text=json.loads(texts[0]) if texts else "",
            value=value,
            checked=bool(re.search(r"(?:^| )checked(?: |$)", plain)),
            focused=bool(re.search(r"(?:^| )focused(?: |$)", plain)),
        )
        while stack and stack[-1].depth >= depth:
            stack.pop()
        if stack:
            element.parent = stack[-1]
            stack[-1].children.append(element)
        stack.append(element)
        elements.append(element)
    return elements


__all__ = ["TEXT_LIMIT", "Element", "parse_page", "render_page"]
