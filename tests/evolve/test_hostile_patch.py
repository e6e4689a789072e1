"""The editor-reply patch parser on replies shaped to be slow (issue #24): it is linear in the
reply's length, and it finds exactly the blocks the earlier regex found (kept here as the
reference the parser is compared with, on generated replies)."""

from __future__ import annotations

import random
import re
import time

import pytest

from harnessctl.evolve.patch import PatchError, parse_patch

# The parser this replaced: the reference for what a reply means.
REFERENCE = re.compile(
    r"^(?P<path>[^\n`<>=]+?)[ \t]*\n(?:```[^\n]*\n)?<<<<<<< SEARCH[ \t]*\n(?P<search>.*?)"
    r"^=======[ \t]*\n(?P<replace>.*?)^>>>>>>> REPLACE[ \t]*$",
    re.S | re.M,
)

LINES = [
    "harness.py", "  prompts/system.md  ", "foo.py\r", "`a.py`", "a.py ```", "prose: here",
    "```python", "```", "<<<<<<< SEARCH", "<<<<<<< SEARCH  ", "<<<<<<< SEARCH\r",
    "=======", "======= \t", "========", ">>>>>>> REPLACE", ">>>>>>> REPLACE ",
    ">>>>>>> REPLACE\r", "code = 1", "x < y", "", " ", "\t", "\r",
]  # fmt: skip
BLOCK = ["harness.py", "<<<<<<< SEARCH", "old", "=======", "new", ">>>>>>> REPLACE"]


def reference(text: str) -> list[tuple[str, str, str]]:
    return [
        (m.group("path").strip().strip("`").strip(), m.group("search"), m.group("replace"))
        for m in REFERENCE.finditer(text)
    ]


def parsed(text: str) -> list[tuple[str, str, str]]:
    try:
        return [(b.path, b.search, b.replace) for b in parse_patch(text)]
    except PatchError:
        return []


def generated(rng: random.Random) -> str:
    lines: list[str] = []
    for _ in range(rng.randint(0, 6)):
        if rng.random() < 0.3:  # a whole block, maybe with a line dropped or doubled
            block = list(BLOCK)
            if rng.random() < 0.5:
                i = rng.randrange(len(block))
                block[i : i + 1] = rng.choice([[], [block[i]] * 2, [rng.choice(LINES)]])
            lines += block
        else:
            lines += [rng.choice(LINES) for _ in range(rng.randint(1, 4))]
    return "\n".join(lines) + rng.choice(["", "\n", "\n\n"])


def test_the_parser_finds_what_the_reference_found():
    rng = random.Random(24)
    with_blocks = 0
    for _ in range(20_000):
        text = generated(rng)
        expected = reference(text)
        assert parsed(text) == expected, repr(text)
        with_blocks += bool(expected)
    assert with_blocks > 4_000  # the comparison covered replies with blocks, many of them


def timed(text: str) -> float:
    """The parser's best CPU time over five runs: this thread's, not the wall clock's, so a
    busy machine (CI's two cores, another suite beside it) that preempts a run does not
    inflate it; what makes a parser quadratic is CPU work, and that is still counted."""
    best = float("inf")
    for _ in range(5):
        started = time.thread_time()
        parsed(text)
        best = min(best, time.thread_time() - started)
    return best


def test_the_parser_is_linear_in_the_reply():
    """112 KB of SEARCH headers that never close took the regex 4.5 s (quadratic): ten times
    the reply now takes about ten times as long, not a hundred."""
    unit = "harness.py\n<<<<<<< SEARCH\nx = 1\n"
    small, large = unit * 400, unit * 4000
    assert len(large) > 112_000
    ratio = timed(large) / max(timed(small), 1e-6)
    assert ratio < 40, ratio


@pytest.mark.parametrize(
    "unit",
    [
        "harness.py\n<<<<<<< SEARCH\nx = 1\n=======\ny = 2\n",  # never replaced: was cubic
        "harness.py\n```python\n<<<<<<< SEARCH\n" + "x" * 60 + "\n",
        "p" + " \t" * 60 + "\n",
    ],
)
def test_hostile_replies_of_112_kb_parse_at_once(unit):
    text = unit * (112_000 // len(unit) + 1)
    assert timed(text) < 2.0  # generous: linear is milliseconds
