"""The miniwob environment's pure parts, no browser: the page as text and back, the action
space's parsing and its refusals, task files, the suite, the contract and the registry."""

from __future__ import annotations

import json

import pytest

from harnessctl.envs import get_environment
from harnessctl.envs.miniwob.actions import TEXT_LIMIT, ActionError, parse_action
from harnessctl.envs.miniwob.dom import parse_page, render_page
from harnessctl.envs.miniwob.tasks import load_tasks
from tests.helpers import ROOT

SUITE = ROOT / "examples" / "miniwob"

#: core.getDOMInfo()'s shape for a small page (body > #wrap > #area, as every task page).
DOM = {
    "ref": 1, "tag": "BODY", "children": [{
        "ref": 2, "tag": "DIV", "id": "wrap", "children": [{
            "ref": 3, "tag": "DIV", "id": "area", "children": [
                {"ref": 4, "tag": "LABEL", "classes": "", "children": [
                    {"ref": 5, "tag": "INPUT_checkbox", "id": "ch0", "value": True,
                     "children": []},
                    {"ref": -1, "tag": "t", "text": 'say "hi"', "children": []},
                ]},
                {"ref": 6, "tag": "INPUT_text", "id": "tt", "classes": "a b", "value": "x",
                 "focused": True, "children": []},
                {"ref": 7, "tag": "BUTTON", "id": "subbtn", "text": "Submit", "children": []},
            ],
        }],
    }],
}  # fmt: skip


def test_the_page_renders_one_element_a_line_and_reads_back():
    text = render_page(DOM)
    assert text.splitlines() == [
        "[4] label",
        "  [5] input[checkbox] #ch0 checked",
        '  "say \\"hi\\""',
        '[6] input[text] #tt .a .b value="x" focused',
        '[7] button #subbtn "Submit"',
    ]
    label, box, field, button = parse_page(text)
    assert (label.ref, label.text, [c.ref for c in label.children]) == (4, 'say "hi"', [5])
    assert box.checked and box.parent is label and box.tag == "input[checkbox]"
    assert (field.id, field.classes, field.value, field.focused) == ("tt", ("a", "b"), "x", True)
    assert (button.ref, button.text, button.id) == (7, "Submit", "subbtn")


def test_actions_in_text_and_as_calls():
    assert parse_action("click", "[5]", None).describe() == "click [5]"
    assert parse_action("click", "5", None).ref == 5
    assert parse_action("click", "", {"ref": 5}).ref == 5
    typed = parse_action("type", '[6] "a \\"quoted\\" word"', None)
    assert (typed.ref, typed.text) == (6, 'a "quoted" word')
    assert parse_action("type", "", {"ref": "6", "text": "hi"}).text == "hi"
    assert parse_action("press", "<Enter>", None).keys == ("\ue007",)
    assert parse_action("press", "", {"key": "C-a"}).keys == ("\ue009", "a")


@pytest.mark.parametrize(
    "tool, argument, arguments, why",
    [
        ("open", "[5]", None, "unknown tool"),
        ("click", '"Submit"', None, "ref first"),
        ("click", "[5] [6]", None, "only an element's ref"),
        ("click", "", {"ref": True}, "ref must be"),
        ("click", "", {"ref": "5; alert(1)"}, "ref must be"),
        ("type", "[5] " + "x" * (TEXT_LIMIT + 1), None, "text too long"),
        ("type", "", {"ref": 5, "text": ["not", "text"]}, "text must be a string"),
        ("press", "<Nope>", None, "unknown key"),
        ("press", "", {"key": 5}, "press takes a key"),
    ],
)
def test_a_malformed_or_hostile_action_is_refused_with_the_reason(tool, argument, arguments, why):
    with pytest.raises(ActionError, match=why):
        parse_action(tool, argument, arguments)


def test_task_files_load_and_a_broken_record_names_file_line_and_field(tmp_path):
    good = {"task": "click-button", "seed": 3}
    lines = [good, {"task": "Click Button", "seed": 1}, {"task": "enter-text", "seed": -1},
             {"task": "enter-text", "seed": 1, "category": ""}, good]  # fmt: skip
    path = tmp_path / "click.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\nnot json\n")
    loaded = load_tasks(tmp_path)
    assert [(t.id, t.category) for t in loaded.tasks] == [("click-button.3", "click")]
    messages = [(p.line, p.message.split(":")[0]) for p in loaded.problems]
    assert messages == [(2, "task"), (3, "seed"), (4, "category"), (5, "(id)"), (6, "(line)")]


def test_the_suite_has_45_tasks_in_five_categories_and_seeded_splits():
    from harnessctl.suite import load_suite

    suite = load_suite(SUITE)
    tasks = suite.all_tasks.tasks
    assert len(tasks) == 45 and not suite.all_tasks.problems
    categories = {t.category for t in tasks}
    assert categories == {"click", "type", "form", "navigation", "search"}
    train, test = suite.tasks("train").tasks, suite.tasks("test").tasks
    assert {t.id for t in train}.isdisjoint(t.id for t in test)
    assert len(train) + len(test) == 45 and {t.category for t in train} == categories


def test_the_kind_is_registered_and_public_material_holds_no_solution(tmp_path):
    from harnessctl.policies import OFFLINE_POLICIES

    env = get_environment("miniwob")
    assert env.surface == "host" and env.tools == ("click", "type", "press")
    assert {"sim/miniwob", "replay/miniwob"} <= set(OFFLINE_POLICIES.names())
    task = env.load_tasks(SUITE / "tasks").tasks[0]
    env.prepare(task, tmp_path)
    public = json.loads((tmp_path / "task.json").read_text())
    assert set(public) == {"task_id", "env", "miniwob_task", "instruction", "tools"}
    assert "seed" not in public
    with pytest.raises(ValueError):
        get_environment("miniwob", success_threshold=2)


OBSERVATION = 'Task: Click button ONE.\nPage:\n[4] button #subbtn "ONE"\n[5] button #subbtn2 "TWO"'
FIRST = [{"role": "system", "content": "..."}, {"role": "user", "content": OBSERVATION}]
CLICK = {"type": "function", "function": {"name": "click", "parameters": {}}}


def test_the_replay_reads_the_page_and_answers_in_text_or_as_a_call():
    from harnessctl.envs.miniwob.replay import GIVE_UP, next_reply

    assert next_reply("click-test-2", FIRST, []).endswith("\nAction: click [4]")
    call = next_reply("click-test-2", FIRST, [CLICK])
    assert call["tool_calls"] == [{"name": "click", "arguments": {"ref": 4}}]
    assert next_reply("no-such-task", FIRST, []) == GIVE_UP


def test_the_sims_modes_are_seeded_and_skill_switches_them_off():
    from harnessctl.envs.miniwob.sim import MODES, SimMiniwob, plan_episode

    sim = SimMiniwob()
    plans = [plan_episode(f"t{i}", 0, sim.rates({})) for i in range(200)]
    assert {p.mode for p in plans} == {*MODES, None}
    assert plans == [plan_episode(f"t{i}", 0, sim.rates({})) for i in range(200)]
    assert all(plan_episode(f"t{i}", 0, sim.rates({"skill": 1})).mode is None for i in range(200))
    view = {"task_id": "click-test-2.1", "task": "click-test-2"}
    # a seed whose modes strike from the first turn
    seed = next(
        s for s in range(50)
        if plan_episode(view["task_id"], s, {"label": 1}).turn == 0
        and plan_episode(view["task_id"], s, {"format": 1}).turn == 0
    )  # fmt: skip
    assert sim.reply(view, FIRST, seed, {"skill": 1}, []).endswith("Action: click [4]")
    label = sim.reply(view, FIRST, seed, {"rate_label": 1, "skill": 1}, [])
    assert label.endswith('Action: click "ONE"') and "click [4]" in label  # meant, then sent
    prose = sim.reply(view, FIRST, seed, {"rate_format": 1, "skill": 1}, [])
    assert "Action:" not in prose and "click [4]" in prose
    # offered the functions, it calls them: label does not apply, and format writes the call
    # as JSON text in the reply instead of a tool call
    call = sim.reply(view, FIRST, seed, {"rate_label": 1, "skill": 1}, [CLICK])
    assert call["tool_calls"] == [{"name": "click", "arguments": {"ref": 4}}]
    written = sim.reply(view, FIRST, seed, {"rate_format": 1, "skill": 1}, [CLICK])
    assert isinstance(written, str) and "Action:" not in written
    assert json.loads(written.splitlines()[-1]) == {"name": "click", "arguments": {"ref": 4}}


def _harness(tmp_path, function_calling: bool, repair: str | None = None):
    """miniwob-base (or its copy with a catalogue repair applied) loaded as the sandbox's
    runtime loads it, with or without function calling."""
    import shutil
    import sys

    import yaml

    import harnessctl.runtime as rt
    from harnessctl.envs.miniwob import HERE
    from harnessctl.evolve.patch import apply_blocks, parse_patch, write_files
    from harnessctl.runtime.boot import load_harness

    sys.modules.setdefault("harnessctl_runtime", rt)  # the name harness code imports it by
    target = tmp_path / "harness"
    shutil.copytree(ROOT / "harnesses" / "miniwob-base", target)
    if repair is not None:
        spec = yaml.safe_load((HERE / "directions" / "repairs" / f"{repair}.yaml").read_text())
        write_files(target, apply_blocks(target, parse_patch(spec["patch"])))
    manifest = yaml.safe_load((target / "harness.yaml").read_text())
    manifest["settings"]["function_calling"] = function_calling
    (tmp_path / "task").mkdir()
    return load_harness(target, tmp_path / "task", manifest)


def _parse(harness, content: str, calls=()):
    import harnessctl.runtime as rt
    from harnessctl.runtime.client import ModelReply

    state = rt.State(task={}, max_rounds=30)
    state.reply = ModelReply(content=content, usage={}, raw={}, tool_calls=list(calls))
    return harness.parse_action(content, state)


WRITTEN = 'I will click it.\n{"name": "click", "arguments": {"ref": 6}}'


def test_the_system_prompt_matches_the_protocol(tmp_path):
    import harnessctl.runtime as rt

    state = rt.State(task={}, max_rounds=30)
    text = _harness(tmp_path / "text", False)
    calls = _harness(tmp_path / "calls", True)
    assert "Action: click [6]" in text.system_prompt(state) and not text.tool_specs
    prompt = calls.system_prompt(state)
    assert "Action:" not in prompt and "click [" not in prompt
    assert all(f"`{name}`" in prompt for name in ("click", "type", "press"))
    assert calls.function_names() == ["click", "type", "press"]
    assert calls.model_params(state)["tools"] == calls.tool_specs


def test_under_function_calling_the_base_takes_tool_calls_only(tmp_path):
    """The OpenAI protocol: an action is a tool call of the reply. An Action line or a call
    written as JSON text is no call: a format failure, as the text protocol's missing line."""
    from harnessctl.runtime.client import ToolCall

    base = _harness(tmp_path, True)
    called = _parse(base, "", [ToolCall("c1", "click", '{"ref": 6}')])
    assert (called.kind, called.tool, called.arguments) == ("tool", "click", {"ref": 6})
    for content in (WRITTEN, "Think: the button.\nAction: click [6]"):
        refused = _parse(base, content)
        assert refused.kind == "invalid" and refused.error == "no function call in the reply"
    text = _parse(_harness(tmp_path / "t", False), "Think: ok\nAction: click [6]")
    assert (text.kind, text.tool, text.argument) == ("tool", "click", "[6]")


@pytest.mark.parametrize(
    "content, expected",
    [
        (WRITTEN, ("click", {"ref": 6})),
        ('<tool_call>\n{"name": "type", "arguments": {"ref": 5, "text": "a}b"}}\n</tool_call>',
         ("type", {"ref": 5, "text": "a}b"})),
        ('```json\n{"name": "press", "arguments": "{\\"key\\": \\"<Enter>\\"}"}\n```',
         ("press", {"key": "<Enter>"})),
        ('{"ref": 3} then {"name": "click", "parameters": {"ref": 4}}', ("click", {"ref": 4})),
        ('{"name": "scroll", "arguments": {"ref": 4}}', None),
        ('{"name": "click", "arguments": [4]}', None),
        ("no call here {", None),
    ],
)  # fmt: skip
def test_the_call_in_text_repair_reads_a_call_written_as_json(tmp_path, content, expected):
    repaired = _harness(tmp_path, True, repair="call-in-text")
    action = _parse(repaired, content)
    if expected is None:
        assert action.kind == "invalid" and action.error == "no function call in the reply"
    else:
        assert (action.kind, action.tool, action.arguments) == ("tool", *expected)
    # the text protocol is untouched by it
    text = _parse(_harness(tmp_path / "t", False, repair="call-in-text"), WRITTEN)
    assert text.kind == "invalid" and "Action line" in text.error


def test_the_rule_editor_picks_the_repair_the_failure_calls_for():
    """Both format repairs target invalid_format: what the model wrote decides which one the
    offline editor proposes (and each applies to the base). The digests are as evolve makes
    them for these failures: no error text, the reply."""
    from harnessctl.envs.miniwob import HERE
    from harnessctl.evolve.digest import Digest
    from harnessctl.evolve.directions import load_direction
    from harnessctl.evolve.editors import RULE_HEADER, EditContext, load_repairs, rule_editor

    direction = load_direction(HERE / "directions" / "format-validation.yaml")
    repairs = [r.id for r in load_repairs("miniwob") if r.direction == direction.name]
    assert sorted(repairs) == ["call-in-text", "format-reprompt"]
    base = ROOT / "harnesses" / "miniwob-base"
    files = {p.name: p.read_text() for p in [base / "harness.py"]}

    def proposed(reply: str) -> str:
        step = {"round": 1, "kind": "invalid_format", "reply": reply, "feedback": None}
        failure = Digest("click-test.1", "click", 0, "invalid_format", None, "...", [step])
        ctx = EditContext(direction=direction, files=files, digests=[failure])
        proposal = rule_editor(family="miniwob").propose(ctx, None)
        assert proposal is not None
        return proposal.response[len(RULE_HEADER) :].split(":", 1)[0]

    assert proposed("Think: the next step.\\nI should click [6] next.") == "format-reprompt"
    assert proposed(WRITTEN.replace("\n", "\\n")) == "call-in-text"


def _alive(pid: int) -> bool:
    from harnessctl.envs.miniwob.reaper import running

    return running(pid)


def _gone(pids, seconds: float = 10) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_alive(p) for p in pids)


@pytest.mark.skipif(not __import__("os").path.isdir("/proc"), reason="the reaper reads /proc")
def test_the_reaper_kills_what_its_owner_left_when_the_owner_is_killed(tmp_path):
    """An owner registers three process groups (stand-ins for browsers, each a session of its
    own with a child), quits one itself, registers one under a start time that is not its
    leader's (a reused id) and is SIGKILLed: its reaper kills the registered group, child
    and all, and removes its profile; the quit one and the other's are left alone."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import json, os, signal, subprocess, sys
        from harnessctl.envs.miniwob.browser import REAPER
        def group():  # a session leader and its child, as chromedriver and Chromium
            leader = subprocess.Popen(
                ["sh", "-c", "sleep 60 >/dev/null & echo $!; exec >/dev/null; wait"],
                start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )
            child = int(leader.stdout.readline())
            leader.stdout.close()
            return leader, child
        (kept, child), (quit, _), (foreign, _) = group(), group(), group()
        REAPER.add(kept.pid, sys.argv[1])
        REAPER.add(quit.pid, "")
        REAPER.drop(quit.pid)
        REAPER.groups[foreign.pid] = {"add": foreign.pid, "started": "1", "profile": ""}
        REAPER._send(REAPER.groups[foreign.pid])
        pids = [kept.pid, child, quit.pid, foreign.pid, REAPER._process.pid]
        print(json.dumps(pids), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    profile = tmp_path / "hx-chromium-profile"
    (profile / "Default").mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-c", script, str(profile)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    kept, child, quit, foreign, reaper = json.loads(done.stdout.strip().splitlines()[-1])
    try:
        assert _gone([reaper]) and _gone([kept, child])  # the group, child and all
        assert not profile.exists()
        assert all(_alive(p) for p in (quit, foreign))
    finally:
        for group in (kept, quit, foreign):
            with __import__("contextlib").suppress(OSError):
                os.killpg(group, signal.SIGKILL)
