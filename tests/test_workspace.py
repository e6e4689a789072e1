import shutil

import git
import pytest

from harnessctl.errors import ConfigError
from harnessctl.workspace import init_workspace, load_workspace
from tests.helpers import ROOT


def test_init_makes_a_committed_git_workspace(tmp_path, monkeypatch):
    ws = init_workspace(tmp_path / "w")
    repo = git.Repo(ws.root)
    assert not repo.is_dirty(untracked_files=True)
    # every bundled base harness: the text protocol and the function-calling one
    assert {p.name for p in (ws.root / "harnesses").iterdir()} >= {"dbbench-base", "dbbench-fc"}
    assert (ws.root / "harnesses" / "dbbench-fc" / "harness.yaml").is_file()
    assert (ws.root / "examples" / "dbbench" / "suite.yaml").is_file()
    assert ".harnessctl/" in (ws.root / ".gitignore").read_text()
    assert ws.config.suite == "examples/dbbench" and ws.config.policy is None
    # no policy set: each command falls back to the environment's own offline test double
    from harnessctl.cli.options import policy_of

    assert policy_of(ws, None, None, "dbbench").model == "sim/dbbench"
    assert policy_of(ws, "openai/x", ["temperature=0.5"], "dbbench").params == {"temperature": 0.5}
    # the store lives in the ignored state directory
    ws.open_store().rollouts()
    assert (ws.root / ".harnessctl" / "store.db").is_file()
    assert not repo.is_dirty(untracked_files=True)
    init_workspace(ws.root)  # idempotent
    assert len(list(repo.iter_commits())) == 1


def test_the_project_checkout_is_a_workspace(monkeypatch):
    monkeypatch.chdir(ROOT / "harnessctl")
    ws = load_workspace()
    assert ws.root == ROOT
    assert ws.config.suite == "examples/dbbench"


def test_layering_env_over_yaml_and_errors_name_the_field(tmp_path, monkeypatch):
    (tmp_path / "harnessctl.yaml").write_text("workers: 3\nsandbox: local\n")
    monkeypatch.setenv("HARNESSCTL_WORKSPACE", str(tmp_path))
    assert load_workspace().config.workers == 3
    monkeypatch.setenv("HARNESSCTL_WORKERS", "5")
    assert load_workspace().config.workers == 5
    monkeypatch.setenv("HARNESSCTL_STORE_URL", "sqlite:///" + str(tmp_path / "x.db"))
    assert load_workspace().store_url().endswith("x.db")
    (tmp_path / "harnessctl.yaml").write_text("workers: many\n")
    monkeypatch.delenv("HARNESSCTL_WORKERS")
    with pytest.raises(ConfigError) as err:
        load_workspace()
    assert err.value.where.endswith("harnessctl.yaml: workers")


def test_the_base_harness_is_the_one_lineage_root_of_the_chosen_harnesses(tmp_path):
    ws = init_workspace(tmp_path / "w")
    child = ws.root / "harnesses" / "dbbench-base.x.r1"

    shutil.copytree(ws.root / "harnesses" / "dbbench-base", child)
    manifest = child / "harness.yaml"
    text = manifest.read_text().replace("name: dbbench-base", "name: dbbench-base.x.r1")
    manifest.write_text(text + "parent: dbbench-base\n")
    assert ws.base_harness(None, ["dbbench-base.x.r1"]).name == "dbbench-base"
    assert ws.base_harness("dbbench-fc").name == "dbbench-fc"
    with pytest.raises(ConfigError) as err:  # two lineages and nothing chosen: ask
        ws.base_harness(None)
    assert err.value.where == "--base" and "dbbench-base, dbbench-fc" in err.value.message
    with pytest.raises(ConfigError, match="dbbench-base, dbbench-fc"):
        ws.base_harness(None, ["dbbench-base.x.r1", "dbbench-fc"])


def test_outside_a_workspace_nothing_is_created_and_the_error_says_so(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from harnessctl.cli import app

    monkeypatch.delenv("HARNESSCTL_WORKSPACE", raising=False)
    monkeypatch.delenv("HARNESSCTL_STORE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    listed = runner.invoke(app, ["rollouts"])
    assert listed.exit_code == 2 and "no workspace here" in listed.stderr
    evaluated = runner.invoke(app, ["eval", "dbbench-base"])
    assert evaluated.exit_code == 2
    assert "not a harness directory, and no workspace here" in evaluated.stderr
    assert list(tmp_path.iterdir()) == []  # no store, no state directory
    url = f"sqlite:///{tmp_path / 'named.db'}"
    assert runner.invoke(app, ["rollouts", "--store", url]).exit_code == 0  # named: opened
