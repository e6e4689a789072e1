"""Text from outside (model replies, harness output, task text, error messages) is printed
as itself: never read as rich markup, so brackets survive and a stray ``[/]`` cannot crash."""

from __future__ import annotations

import sys

from typer.testing import CliRunner

from harnessctl.cli import app
from harnessctl.workspace import load_workspace
from tests.helpers.stores import make_rollout

runner = CliRunner()
HOSTILE = "closing [/] then [bold]x[/bold] and [red]y"


def stored_trajectory(rollout_id: str, **fields) -> dict:
    """A stored trajectory's JSON: the fields every trajectory has, then ``fields``."""
    return {
        "format_version": 1,  # an old record: loads through the upgrade
        "rollout_id": rollout_id,
        "task_id": f"t-{rollout_id}",
        "seed": 0,
        "harness": {"name": "dbbench-base", "hash": "h"},
        "policy": {"model": "sim/dbbench", "params": {}},
        **fields,
    }


def test_show_prints_a_reply_with_markup_literally(workspace):
    trajectory = stored_trajectory(
        "r1",
        outcome="wrong_answer",
        calls=[
            {
                "index": 0,
                "model": "sim/dbbench",
                "status": "ok",
                "messages": [{"role": "system", "content": "task text [i]kept[/i]"}],
                "reply": HOSTILE,
            }
        ],
        events=[{"event": "turn", "kind": "sql", "feedback": "harness said [/bold]"}],
        result={"status": "done", "answer": "[x]", "traceback": "Error [/] at line 1"},
        score={"success": False, "detail": {"why": "[b]no[/b]"}},
    )
    row = make_rollout(
        "k1",
        outcome="wrong_answer",
        success=False,
        harness_name="dbbench-base",
        error="boom [/]",
        category="[select]",
    )
    stored = load_workspace(workspace).open_store().record_rollout(row, [], trajectory)

    shown = runner.invoke(app, ["show", stored.id])

    assert shown.exit_code == 0, shown.output
    out = shown.stdout
    assert "closing [/] then [bold]x[/bold] and [red]y" in out
    assert "model call 0 [ok]" in out
    assert "task text [i]kept[/i]" in out
    assert "harness said [/bold]" in out
    assert "Error [/] at line 1" in out
    assert "boom [/]" in out and "([select])" in out
    assert "detail={'why': '[b]no[/b]'}" in out


def test_an_error_message_keeps_its_brackets(workspace, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed

    result = runner.invoke(app, ["eval", "dbbench-base", "--executor", "ray", "--task", "dev-000"])

    assert result.exit_code == 2, result.output
    assert "pip install 'harnessctl[ray]'" in result.output


def test_a_harness_name_with_brackets_is_named_in_the_error(workspace):
    result = runner.invoke(app, ["eval", "missing[ray]"])

    assert result.exit_code == 2
    assert "missing[ray]" in result.output


def test_version_and_shell_completion(monkeypatch):
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"harnessctl {version('harnessctl')}"
    # the shell named, not detected from the process tree: a test run launched without a
    # shell among its ancestors (setsid, a detached job) detects none (typer's own tests do so)
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    shown = runner.invoke(app, ["--show-completion", "bash"])
    assert shown.exit_code == 0 and "_harnessctl_completion" in shown.stdout


def test_show_says_why_the_outcome_differs_from_the_runtime_status(workspace):
    trajectory = stored_trajectory(
        "r2",
        outcome="tool_error",
        calls=[],
        result={"status": "step_limit", "tool_error_streak": 4},
    )
    row = make_rollout("k2", outcome="tool_error", success=False, harness_name="dbbench-base")
    stored = load_workspace(workspace).open_store().record_rollout(row, [], trajectory)
    shown = runner.invoke(app, ["show", stored.id], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "runtime status: step_limit" in shown.stdout
    assert "outcome tool_error: the rounds ran out while the last 4 tool calls all failed" in (
        shown.stdout
    )
