"""Patch parsing and applying, directions, the acceptance rule, budgets."""

import shutil

import pytest

from harnessctl.errors import ConfigError
from harnessctl.evolve.directions import catalogue, select
from harnessctl.evolve.patch import PatchError, apply_blocks, changed_lines, parse_patch
from harnessctl.evolve.reward import judge, sign_test
from harnessctl.evolve.validate import Rejected, build_child
from harnessctl.harness import load_harness
from tests.helpers import BASE_HARNESS


def test_parse_tolerates_prose_and_fences_and_applies_all_or_nothing(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    reply = (
        "Here is my fix.\n\na.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 10\n"
        ">>>>>>> REPLACE\n```\n\nnew.py\n<<<<<<< SEARCH\n=======\nz = 3\n>>>>>>> REPLACE\n"
    )
    blocks = parse_patch(reply)
    assert [b.path for b in blocks] == ["a.py", "new.py"]
    files = apply_blocks(tmp_path, blocks)
    assert files == {"a.py": "x = 10\ny = 2\n", "new.py": "z = 3\n"}
    assert changed_lines(tmp_path, files) == 3
    bad = parse_patch(reply.replace("x = 1\n=", "nope\n="))
    with pytest.raises(PatchError) as err:
        apply_blocks(tmp_path, bad)
    assert err.value.reason == "does_not_apply"
    assert (tmp_path / "a.py").read_text() == "x = 1\ny = 2\n"  # nothing written
    with pytest.raises(PatchError, match="bad_path"):
        apply_blocks(tmp_path, parse_patch(reply.replace("a.py\n```", "../a.py\n```")))
    with pytest.raises(PatchError, match="no_blocks"):
        parse_patch("just prose")


def test_ambiguous_search_is_refused(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\nx = 1\n")
    blocks = parse_patch("a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n")
    with pytest.raises(PatchError, match="found 2 times"):
        apply_blocks(tmp_path, blocks)


def test_sign_test_and_acceptance_rule():
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 0) == pytest.approx(1 / 32)
    assert sign_test(3, 3) > 0.5
    assert judge(5, 0, 12, 12).accepted
    assert not judge(2, 0, 12, 12).accepted  # p = 0.25 > 0.1
    assert not judge(6, 6, 12, 12).accepted
    assert judge(2, 0, 12, 12, alpha=0.3).accepted
    assert judge(5, 1, 12, 12).reward == pytest.approx(4 / 24)


def test_workspace_directions_override_and_errors_name_the_field(tmp_path):
    (tmp_path / "directions").mkdir()
    (tmp_path / "directions" / "termination.yaml").write_text(
        "name: termination\nbrief: mine\ntargets: [step_limit]\nmax_changed_lines: 5\n"
    )
    found = catalogue("dbbench", workspace=tmp_path)
    assert found["termination"].brief == "mine" and len(found) == 5
    with pytest.raises(ConfigError, match="unknown direction"):
        select(["nope"], found)
    (tmp_path / "directions" / "bad.yaml").write_text("name: bad\nbrief: x\ntargets: [sucess]\n")
    found = catalogue("dbbench", workspace=tmp_path)
    with pytest.raises(ConfigError) as err:
        select(["bad"], found)
    assert err.value.where.endswith("bad.yaml: targets")


def test_a_broken_direction_affects_only_itself_and_shows_every_problem(tmp_path, caplog):
    (tmp_path / "directions").mkdir()
    typo = tmp_path / "directions" / "typo.yaml"
    typo.write_text("name: typo\nbrief: x\ntarget: [wrong_answer]\n")  # targets misspelt
    found = catalogue("dbbench", workspace=tmp_path)
    with pytest.raises(ConfigError) as err:
        select(["typo"], found)
    assert err.value.where == f"{typo}: targets"
    assert "Field required" in err.value.message and "also target: unknown field" in str(err.value)
    assert [d.name for d in select(["termination"], found)] == ["termination"]
    with caplog.at_level("WARNING", logger="harnessctl"):
        everything = select(None, found)
    assert len(everything) == 5 and "typo" not in {d.name for d in everything}
    assert "direction typo skipped" in caplog.text
    override = tmp_path / "directions" / "termination.yaml"
    override.write_text("name: termination\nbrief: x\ntargets: [nope]\n")
    found = catalogue("dbbench", workspace=tmp_path)  # a broken override: no silent fallback
    with pytest.raises(ConfigError, match="termination.yaml: targets"):
        select(["termination"], found)


def test_build_child_enforces_scope_and_budget(tmp_path):
    parent = load_harness(BASE_HARNESS)
    directions = catalogue("dbbench")
    anchor = "        return state.answer\n"
    big = "".join(f"        _x{i} = {i}\n" for i in range(70)) + anchor
    patch = f"harness.py\n<<<<<<< SEARCH\n{anchor}=======\n{big}>>>>>>> REPLACE\n"
    with pytest.raises(Rejected) as err:
        build_child(parent, directions["termination"], patch, tmp_path / "c", {"name": "c"})
    assert err.value.reason == "over_budget"
    line = "Your input will be raw MySQL response, you have to deal with it by yourself.\n"
    prompt = f"prompts/big_prompt.md\n<<<<<<< SEARCH\n{line}=======\nRaw rows.\n>>>>>>> REPLACE\n"
    with pytest.raises(Rejected) as err:
        build_child(parent, directions["execution-recovery"], prompt, tmp_path / "c", {"name": "c"})
    assert err.value.reason == "out_of_scope"
    same = f"prompts/big_prompt.md\n<<<<<<< SEARCH\n{line}=======\n{line}>>>>>>> REPLACE\n"
    with pytest.raises(Rejected) as err:  # a proposal that is the parent again
        build_child(parent, directions["context-construction"], same, tmp_path / "c", {"name": "c"})
    assert err.value.reason == "no_change"
    child, _, diff = build_child(
        parent,
        directions["context-construction"],
        prompt,
        tmp_path / "c",
        {"name": "child", "parent": "dbbench-base"},
    )
    assert child.name == "child" and child.manifest.parent == "dbbench-base"
    assert "+Raw rows." in diff and child.hash != parent.hash
    assert line in (BASE_HARNESS / "prompts" / "big_prompt.md").read_text()  # parent untouched
    shutil.rmtree(tmp_path / "c")


def test_editors_resolve_through_the_registry():
    from harnessctl.evolve.editors import EDITORS, LLMEditor, RuleEditor, make_editor

    assert isinstance(make_editor("rules", family="dbbench"), RuleEditor)
    assert isinstance(make_editor("ollama/llama3:8b", family="dbbench"), LLMEditor)
    made = []

    def mine(*, workspace, family, params):
        made.append((family, params))
        return "my-editor"

    EDITORS.register("mine", mine)
    try:
        assert make_editor("mine", family="toy", params={"k": 1}) == "my-editor"
        assert made == [("toy", {"k": 1})]
    finally:
        EDITORS.unregister("mine")
    dotted = make_editor("harnessctl.evolve.editors:rule_editor", family="dbbench")
    assert isinstance(dotted, RuleEditor)


def test_the_evolve_id_covers_every_setting_that_changes_what_is_proposed_or_accepted(workspace):
    from dataclasses import replace

    from harnessctl.evolve.editors import LLMEditor, make_editor
    from harnessctl.evolve.engine import EvolveRequest, evolve_id
    from tests.helpers.evolve import committed_workspace_eval

    _, base, evaluation = committed_workspace_eval(workspace, split="dev")
    catalog = catalogue("dbbench")
    editor = LLMEditor("openai/x", {"api_base": "http://127.0.0.1:1/v1", "api_key": "sk-a"})
    req = EvolveRequest(base, evaluation, [catalog["termination"]], editor)
    same_key = LLMEditor("openai/x", {"api_base": "http://127.0.0.1:1/v1", "api_key": "sk-b"})
    assert evolve_id(replace(req, editor=same_key)) == evolve_id(req)  # a credential is not
    changed = [
        replace(req, editor=LLMEditor("openai/x", {"api_base": "http://127.0.0.1:2/v1"})),
        replace(req, editor=make_editor("rules", family="dbbench")),
        replace(req, rounds=3),
        replace(req, directions=[catalog["termination"], catalog["format-validation"]]),
        replace(req, directions=[catalog["termination"].model_copy(update={"targets": []})]),
        replace(req, alpha=0.05),
        replace(req, min_net=2),
        replace(req, eval=replace(evaluation, max_calls=7)),
        replace(req, eval=replace(evaluation, limits=replace(evaluation.limits, timeout_s=5))),
    ]
    ids = {evolve_id(r) for r in changed}
    assert len(ids) == len(changed) and evolve_id(req) not in ids
