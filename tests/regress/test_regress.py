"""`harnessctl test`: the shipped baselines pass, a deliberately worse variant fails with a
clear message and a JUnit failure, unchanged variants don't flake across seeds."""

import os
import shutil
import subprocess
import sys
from xml.etree import ElementTree as ET

import pytest

from tests.helpers import ROOT


@pytest.fixture
def checkout(tmp_path):
    """A copy of the project's workspace: harnesses, baselines, suite, settings."""
    ws = tmp_path / "ws"
    for part in ("harnesses", "profiles", "examples/dbbench"):
        shutil.copytree(ROOT / part, ws / part)
    shutil.copy(ROOT / "harnessctl.yaml", ws / "harnessctl.yaml")
    return ws


def run(ws, *args):
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    return subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", "test", *map(str, args)],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def junit_cases(path):
    root = ET.parse(path).getroot()
    return {(c.get("classname"), c.get("name")): c.find("failure") for c in root.iter("testcase")}


@pytest.mark.slow
def test_shipped_harnesses_pass_their_baselines(checkout):
    proc = run(checkout, "--junit", checkout / "junit.xml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cases = junit_cases(checkout / "junit.xml")
    assert ("harnessctl.dbbench-base", "overall") in cases
    assert ("harnessctl.dbbench-base", "category:INSERT") in cases
    assert all(failure is None for failure in cases.values())
    assert "0 failed" in proc.stdout


@pytest.mark.slow
def test_a_worse_variant_fails_with_a_clear_message(checkout):
    src = checkout / "harnesses" / "dbbench-base"
    dst = checkout / "harnesses" / "dbbench-noformat"
    shutil.copytree(src, dst)
    code = (dst / "harness.py").read_text()
    (dst / "harness.py").write_text(code.replace('r"```sql', 'r"```sqlite'))  # drops the rule
    (dst / "harness.yaml").write_text(
        (dst / "harness.yaml").read_text().replace("name: dbbench-base", "name: dbbench-noformat")
    )
    # it claims the base's numbers as its baseline
    shutil.copytree(checkout / "profiles" / "dbbench-base", checkout / "profiles" / dst.name)
    proc = run(checkout, "--junit", checkout / "junit.xml")
    assert proc.returncode == 1
    assert "FAIL dbbench-noformat overall: significant drop" in proc.stderr
    cases = junit_cases(checkout / "junit.xml")
    failure = cases[("harnessctl.dbbench-noformat", "overall")]
    assert failure is not None and "significant drop" in failure.get("message")
    assert cases[("harnessctl.dbbench-base", "overall")] is None  # unchanged variant passes
    flips = cases[("harnessctl.dbbench-noformat", "flips")]
    assert flips is None  # flips are reported, not failed, by default
    assert run(checkout, "dbbench-noformat", "--fail-on-flips").returncode == 1


@pytest.mark.slow
@pytest.mark.parametrize("offset", [10, 20])
def test_unchanged_variant_does_not_flake_across_seeds(checkout, offset):
    proc = run(checkout, "dbbench-base", "--seed-offset", offset)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_usage_errors_exit_2(checkout):
    assert run(checkout, "dbbench-base", "--split", "nope").returncode == 2
    shutil.rmtree(checkout / "profiles" / "dbbench-base")
    proc = run(checkout, "dbbench-base")
    assert proc.returncode == 2 and "--update-baseline" in proc.stderr


def test_a_malformed_baseline_exits_2_naming_the_file_and_field(checkout):
    path = checkout / "profiles" / "dbbench-base" / "sim-dbbench" / "dbbench-dev.train.yaml"
    path.write_text(path.read_text().replace("rollouts: 80", "rollouts: eighty"))
    proc = run(checkout, "dbbench-base")
    assert proc.returncode == 2
    assert f"{path}: success.rollouts" in proc.stderr.replace("\n", "")


def test_rollouts_failed_on_infrastructure_exit_3_with_a_junit_error(checkout, monkeypatch):
    """What `test` does when the rollouts cannot run (the evaluation reports every one as
    infra-failed, as with a dead provider): exit 3, a message, an ``error`` case in JUnit."""
    from dataclasses import replace as dc_replace

    from typer.testing import CliRunner

    from harnessctl.cli import app
    from harnessctl.regress import runner as regress_runner

    real = regress_runner.evaluate

    def infra_failed(request, store, progress=None):
        result = real(dc_replace(request, pairs=[]), store, progress)  # runs nothing
        return dc_replace(result, infra_failed=["k1", "k2"])

    monkeypatch.setattr(regress_runner, "evaluate", infra_failed)
    monkeypatch.setenv("HARNESSCTL_WORKSPACE", str(checkout))
    monkeypatch.chdir(checkout)
    junit = checkout / "junit.xml"
    result = CliRunner().invoke(app, ["test", "dbbench-base", "--junit", str(junit)])
    assert result.exit_code == 3, result.output
    assert "ERROR dbbench-base: 2 rollout(s) failed on infrastructure" in result.stderr
    case = ET.parse(junit).getroot().find(".//testcase")
    assert case.get("classname") == "harnessctl.dbbench-base" and case.find("error") is not None


def test_a_test_is_one_run_with_each_harness_evaluation_under_it(checkout, monkeypatch):
    """Issue #56: one `test` of two harnesses is one row in `runs` (the first harness's
    figures), each harness's evaluation a run under it that `show RUN` lists; a harness
    name still finds its evaluation for `compare`. Three pairs per harness keep it cheap."""
    import json
    from dataclasses import replace as dc_replace

    from typer.testing import CliRunner

    from harnessctl.cli import app
    from harnessctl.regress import runner as regress_runner
    from harnessctl.runs import latest_run
    from harnessctl.workspace import load_workspace

    real = regress_runner.evaluate

    def few(request, store, progress=None):
        tasks = request.suite.tasks(request.split).tasks[:3]
        pairs = [(t.id, request.seed) for t in tasks]
        return real(dc_replace(request, pairs=pairs), store, progress)

    monkeypatch.setattr(regress_runner, "evaluate", few)
    shutil.copytree(checkout / "harnesses" / "dbbench-base", checkout / "harnesses" / "dbbench-two")
    manifest = checkout / "harnesses" / "dbbench-two" / "harness.yaml"
    manifest.write_text(manifest.read_text().replace("name: dbbench-base", "name: dbbench-two"))
    shutil.copytree(checkout / "profiles" / "dbbench-base", checkout / "profiles" / "dbbench-two")
    monkeypatch.setenv("HARNESSCTL_WORKSPACE", str(checkout))
    monkeypatch.chdir(checkout)
    cli = CliRunner()

    def json_of(*args):
        result = cli.invoke(app, [*args, "--json"])
        assert result.exit_code in (0, 1), result.output  # 1: three pairs may "regress"
        return json.loads(result.stdout[result.stdout.index("{") :])

    tested = json_of("test")
    assert tested["version"] == 3 and {c["harness"] for c in tested["checks"]} == {
        "dbbench-base",
        "dbbench-two",
    }
    (row,) = json_of("runs")["runs"]
    assert (row["id"], row["command"], row["children"]) == (tested["run_id"], "test", 2)
    assert (row["harness"], row["rollouts"]) == ("dbbench-base", 3)  # the first's figures
    shown = json_of("show", row["id"])
    assert [(c["harness"], c["command"], c["parent_id"]) for c in shown["children"]] == [
        ("dbbench-base", "test", row["id"]),
        ("dbbench-two", "test", row["id"]),
    ]
    assert len(json_of("runs", "--all")["runs"]) == 3
    store = load_workspace(checkout).open_store()
    assert latest_run(store, "dbbench-two").id == shown["children"][1]["id"]
    text = cli.invoke(app, ["test"]).stdout  # the table names the test's run
    newest = json_of("runs")["runs"][0]
    assert newest["command"] == "test" and f"harnessctl show {newest['id'][:12]}" in text
