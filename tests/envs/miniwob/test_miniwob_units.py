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
    # offered the functions, it calls them: format and label do not apply
    for mode in ("format", "label"):
        call = sim.reply(view, FIRST, seed, {f"rate_{mode}": 1, "skill": 1}, [CLICK])
        assert call["tool_calls"] == [{"name": "click", "arguments": {"ref": 4}}]
