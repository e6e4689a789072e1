"""dbbench-base is AgentBench v0.2's DBBench text protocol: its text, its turns, its parser.

The references are facts about AgentBench (THUDM/AgentBench at commit ac57ad0,
``src/server/tasks/dbbench/__init__.py``, Apache-2.0): the SHA-256 of ``big_prompt``, and what
the reply-reading lines of ``DBBench.start_sample`` made of each reply below, recorded by running
them on these replies. A change of the harness's prompt or parser that AgentBench would not make
fails here.
"""

from __future__ import annotations

import hashlib
import sys

import pytest

import harnessctl.runtime as rt
from harnessctl.runtime.boot import load_harness
from harnessctl.runtime.harness import State
from tests.helpers import ROOT

sys.modules.setdefault("harnessctl_runtime", rt)  # the name harness code imports it by

BASE = ROOT / "harnesses" / "dbbench-base"
#: SHA-256 and length of AgentBench v0.2's ``big_prompt``.
BIG_PROMPT_SHA256 = "b4d40c8bfe1e9ea9a9c2c014e16f9e269133123acf536417b1cf1f5fc1c677f5"
BIG_PROMPT_LEN = 1313
#: (reply, what AgentBench made of it: "sql" / "answer" / "invalid", the statement or answer).
AGENTBENCH_READS = [
    ("Let me look.\nAction: Operation\n```sql\nSELECT * FROM t;\n```", "sql", "SELECT * FROM t;"),
    (
        "Action: Operation\n```sql\nSELECT a,\n  b FROM t\nWHERE x = 1;\n```\n"
        "```sql\nSELECT 2;\n```",
        "sql",
        "SELECT a,   b FROM t WHERE x = 1;",
    ),
    ('I found it.\nAction: Answer\nFinal Answer: ["Paris", "12"]', "answer", ' ["Paris", "12"]'),
    ('Action: Answer\nFinal Answer: ["a"]\nmore text', "answer", ' ["a"]'),
    ('Final Answer: ["no newline before"]', "invalid", None),
    ('Thought\nFinal Answer: ["no action line"]', "answer", ' ["no action line"]'),
    ("Action: Operation\nno block here", "invalid", None),
    ("Action: Operation\n```SQL\nSELECT 1;\n```", "invalid", None),
    ("Action: Operation\n```sql SELECT 1;```", "invalid", None),
    ("Action: Operation", "invalid", None),
    ("Action: operation\n```sql\nSELECT 1;\n```\nFinal Answer: [1]", "answer", " [1]"),
    ("Let me think about this before acting.", "invalid", None),
    ("Action: Answer\nFinal Answer: March 19, 1998", "answer", " March 19, 1998"),
    ("Action:  Operation\n```sql\nSELECT 1;\n```", "invalid", None),
]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    import yaml

    manifest = yaml.safe_load((BASE / "harness.yaml").read_text(encoding="utf-8"))
    return load_harness(BASE, tmp_path_factory.mktemp("task"), manifest)


def _state() -> State:
    task = {"instruction": "How many rows?", "context": "The table is t.", "table_name": "t"}
    return State(task=task, max_rounds=16, round=1)


def test_the_prompt_is_agentbenchs_big_prompt_byte_for_byte():
    text = (BASE / "prompts" / "big_prompt.md").read_bytes()
    assert (hashlib.sha256(text).hexdigest(), len(text)) == (BIG_PROMPT_SHA256, BIG_PROMPT_LEN)


def test_the_conversation_is_agentbenchs(harness):
    messages = harness.build_context(_state())
    big = (BASE / "prompts" / "big_prompt.md").read_text(encoding="utf-8")
    assert messages == [
        {"role": "user", "content": big},
        {"role": "assistant", "content": "Ok."},
        {"role": "user", "content": "How many rows?\nThe table is t."},
    ]
    assert harness.max_rounds == 16  # 15 operations, then the reply read for an answer


@pytest.mark.parametrize(("reply", "kind", "content"), AGENTBENCH_READS)
def test_replies_are_read_as_agentbench_reads_them(harness, reply, kind, content):
    action = harness.parse_action(reply, _state())
    if kind == "sql":
        assert (action.kind, action.tool, action.argument) == ("tool", "sql", content)
    elif kind == "answer":  # the harness hands the answer on stripped (the scorer's reading)
        assert (action.kind, action.argument) == ("answer", content.strip())
    else:
        assert action.kind == "invalid"
