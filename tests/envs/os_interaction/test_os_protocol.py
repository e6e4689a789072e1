"""os-base is AgentBench v0.2's OS-interaction text protocol: its text, its turns, its parser.

The references are facts about AgentBench (THUDM/AgentBench at commit ac57ad0,
``src/server/tasks/os_interaction/task.py``, Apache-2.0): the SHA-256 of the instructions it
sends as the first user message and of its ``ONE_SHOT`` conversation, and what its
``extract_action`` returned for each reply below, recorded by running it on these replies
(``action`` ``bash``/``commit``/None and ``content``). A change of the harness's prompt or
parser that AgentBench would not make fails here.
"""

from __future__ import annotations

import hashlib
import json
import sys

import pytest

import harnessctl.runtime as rt
from harnessctl.runtime.boot import load_harness
from harnessctl.runtime.harness import Observation, State
from tests.helpers import ROOT

sys.modules.setdefault("harnessctl_runtime", rt)  # the name harness code imports it by

BASE = ROOT / "harnesses" / "os-base"
INSTRUCTIONS_SHA256 = "7dde4b2ea52af8ee571472f850719844c4672e0f262229552a2070b8f026e99d"
#: SHA-256 of ``json.dumps(ONE_SHOT, sort_keys=True)`` (roles ``user``/``agent``).
ONE_SHOT_SHA256 = "434ee261c0bbc51419bbf0053d4e548fef52acc9e63ae736a05f89dcf0e37f48"
#: (reply, AgentBench's ``action``, its ``content``).
AGENTBENCH_READS = [
    ("Think: list it.\n\nAct: bash\n\n```bash\nls /etc\n```", "bash", "ls /etc"),
    (
        "Think: two.\n\nAct: bash\n\n```bash\ncd /tmp\n```\nand\n```bash\nls -1 | wc -l\n```",
        "bash",
        "cd /tmp\n\nls -1 | wc -l",
    ),
    ("Think: Now I get the answer, it is 220.\n\nAct: answer(220)", "commit", "220"),
    ("Think: x\n\nAct: bash\n\n```bash\nls\n```\n\nAct: answer(5)", "commit", "5"),
    ("Think: x\n\nAct: answer(5)\n\nAct: bash\n\n```bash\nls\n```", "bash", "ls"),
    ("Act: bash\n\n```bash\nwhoami\n```\nAct: answer 7", "bash", "whoami"),
    ("Act: answer(foo(bar))", "commit", "foo(bar)"),
    ("The answer is 8.", None, None),
    ("Think: done.\n\nAct: finish", "commit", None),
    ("Act: Bash\n```bash\necho hi\n```", "bash", "echo hi"),
    ("Act: bash\n```bash\necho hi```", "bash", ""),
    ("Act: answer(a) (b)", "commit", "a) (b"),
    ("Act: something else", None, None),
    ("Act: answer()", "commit", ""),
    ("Act: answer( 42 )\nThink: sure", "commit", " 42 "),
    ("Act:answer(x)", "commit", "x"),
    ("Act: finish now\nAct: answer no parens", "commit", None),
    ("Act: bash\n```sh\nls\n```", "bash", ""),
    ("Think: I have it.\n\nAct: answer(The answer is 8.)", "commit", "The answer is 8."),
]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    import yaml

    manifest = yaml.safe_load((BASE / "harness.yaml").read_text(encoding="utf-8"))
    return load_harness(BASE, tmp_path_factory.mktemp("task"), manifest)


def _state() -> State:
    return State(task={"instruction": "How many users are there?"}, max_rounds=8, round=1)


def test_the_text_is_agentbenchs_byte_for_byte():
    text = (BASE / "prompts" / "instructions.md").read_bytes()
    assert hashlib.sha256(text).hexdigest() == INSTRUCTIONS_SHA256
    shot = json.loads((BASE / "prompts" / "one_shot.json").read_text(encoding="utf-8"))
    blob = json.dumps(shot, sort_keys=True).encode()
    assert hashlib.sha256(blob).hexdigest() == ONE_SHOT_SHA256


def test_the_conversation_is_agentbenchs_one_shot_form(harness):
    messages = harness.build_context(_state())
    instructions = (BASE / "prompts" / "instructions.md").read_text(encoding="utf-8")
    shot = json.loads((BASE / "prompts" / "one_shot.json").read_text(encoding="utf-8"))
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user",
                                             "assistant", "user"]  # fmt: skip
    assert messages[0]["content"] == instructions + "Now, my problem is:\n\n" + shot[0]["content"]
    assert [m["content"] for m in messages[1:6]] == [m["content"] for m in shot[1:]]
    assert messages[-1]["content"] == (
        "Now, I will start a new problem in a new OS. My problem is:\n\nHow many users are there?"
    )
    assert harness.max_rounds == 8
    assert not any(m["role"] == "system" for m in messages)


@pytest.mark.parametrize(("reply", "action", "content"), AGENTBENCH_READS)
def test_replies_are_read_as_agentbench_extract_action_reads_them(harness, reply, action, content):
    parsed = harness.parse_action(reply, _state())
    if action == "bash":
        assert (parsed.kind, parsed.tool, parsed.argument) == ("tool", "bash", content)
    elif action == "commit" and content is None:
        assert (parsed.kind, parsed.tool) == ("tool", "finish")
    elif action == "commit":
        assert (parsed.kind, parsed.argument) == ("answer", content)
    else:
        assert parsed.kind == "invalid"


def test_outputs_are_shown_as_agentbench_shows_them(harness):
    assert harness.show(Observation(text="")) == "The output of the OS is empty."
    assert harness.show(Observation(text="220\n")) == "The output of the OS:\n\n220\n"
