"""``evolve --editor-param`` names checked before any rollout (issue #56): a misspelt name
exits 2 naming it, its close match and the known names, and nothing is run or recorded."""

from __future__ import annotations

import pytest

from harnessctl.errors import ConfigError
from harnessctl.evolve.editors import EDITORS, LLMEditor, make_editor
from harnessctl.workspace import load_workspace
from tests.helpers.cli import invoke

EVOLVE = ("evolve", "dbbench-base", "--split", "dev", "--rounds", "1")


def refused(workspace, *flags: str) -> str:
    """``evolve`` with ``flags``: exit 2 on --editor-param with nothing stored; its output."""
    result = invoke(*EVOLVE, *flags)
    assert result.exit_code == 2, result.output
    assert "--editor-param" in result.output
    store = load_workspace(workspace).open_store()
    assert store.rollouts() == [] and store.edits() == [] and store.runs() == []
    return " ".join(result.output.split())  # the message unfolded


def test_a_misspelt_param_of_each_editor_exits_2_before_any_rollout(workspace):
    said = refused(workspace, "--editor-param", "temprature=0.5")  # rules: reads none
    assert "unknown rules editor parameter 'temprature' (it takes none)" in said
    said = refused(workspace, "--editor", "null", "--editor-param", "kind=alias")
    assert "unknown null editor parameter 'kind'" in said
    # the engineer's names are checked before its directory is looked for
    engineer = ("--editor", "engineer:no-such-dir", "--editor-param", "tempreature=1")
    said = refused(workspace, *engineer)
    assert "unknown engineer parameter 'tempreature'; did you mean 'temperature'?" in said
    assert "max_new_tokens, model, seed, temperature, top_p" in said
    # an LLM editor: refused offline, before the preflight call (no key is set here)
    llm = ("--editor", "openai/gpt-4o-mini", "--editor-param")
    said = refused(workspace, *llm, "edit_fromat=json")
    assert "unknown parameter 'edit_fromat'; did you mean 'edit_format'?" in said
    assert "temperature" in said and "missing credentials" not in said
    said = refused(workspace, *llm, "temperature=3")
    assert "temperature=3 is not a number in [0, 2]" in said


def test_an_llm_editors_provider_params_pass_and_its_own_are_checked():
    editor = make_editor(
        "openai/m", family="dbbench", params={"thinking": {"type": "on"}, "top_k": 20}
    )
    assert isinstance(editor, LLMEditor) and editor.call_params()["thinking"] == {"type": "on"}
    secret = {"aws_secret_access_key": "abc", "api_key": "sk-abcdefghijklmnopqrstu"}
    make_editor("bedrock/m", family="dbbench", params=secret)  # names only, values unshown
    with pytest.raises(ConfigError, match="did you mean 'max_tokens'"):
        make_editor("openai/m", family="dbbench", params={"max_token": 64})


@pytest.fixture
def plugins():
    """Editors registered for one test (as an embedding app registers its own)."""
    names: list[str] = []

    def register(name, factory):
        names.append(name)
        EDITORS.register(name, factory)

    yield register
    for name in names:
        EDITORS.unregister(name)


def test_a_plugin_editor_is_held_to_the_names_it_declares(plugins):
    def factory(*, workspace=None, family="", params=None):
        return ("made", params)

    factory.param_names = ("depth",)  # type: ignore[attr-defined]
    plugins("deep", factory)
    assert make_editor("deep", family="dbbench", params={"depth": 2}) == ("made", {"depth": 2})
    with pytest.raises(ConfigError, match="unknown deep editor parameter 'dept'; did you mean"):
        make_editor("deep", family="dbbench", params={"dept": 2})

    def silent(*, workspace=None, family="", params=None):
        return params

    plugins("silent", silent)  # declares no names: its factory judges its params
    assert make_editor("silent", family="dbbench", params={"any": 1}) == {"any": 1}
