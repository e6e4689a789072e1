"""`harnessctl eval` end to end: real sandbox subprocesses, the real gateway on a unix
socket, litellm, the offline sim policy, the SQLite store."""

import json

import pytest

from harnessctl.workspace import load_workspace
from tests.helpers.cli import TASKS, eval_json, invoke, make_variant, rows, task_flags


@pytest.mark.slow
def test_eval_runs_then_serves_from_cache(workspace):
    result, data = eval_json("dbbench-base", "--rollouts", 2, *task_flags())
    assert result.exit_code == 0
    assert data["executed"] == 12 and data["cached"] == 0
    summary = data["summary"]
    assert summary["rollouts"] == 12 and summary["tasks"] == 6
    assert sum(summary["outcomes"].values()) == 12
    assert 0 <= summary["ci95"][0] <= summary["success_rate"] <= summary["ci95"][1] <= 1
    assert summary["prompt_tokens"] > 0
    stored = rows(workspace)
    assert len(stored) == 12
    assert {r.seed for r in stored} == {0, 1}
    assert all(json.loads(r.isolation_json)["backend"] == "local" for r in stored)

    again = invoke("eval", "dbbench-base", "--rollouts", 2, *task_flags())
    assert again.exit_code == 0, again.output
    assert "served from the cache (no new rollouts)" in again.stdout
    assert len(rows(workspace)) == 12

    # one more seed runs only the new rollouts
    _, more = eval_json("dbbench-base", "--rollouts", 3, *task_flags())
    assert more["executed"] == 6 and more["cached"] == 12


def test_show_renders_a_trajectory(workspace):
    eval_json("dbbench-base", "--rollouts", 1, *task_flags(TASKS[:1]))
    row = rows(workspace)[0]
    shown = invoke("show", row.id[:8])
    assert shown.exit_code == 0, shown.output
    assert row.task_id in shown.stdout and row.outcome in shown.stdout
    assert "model call 0" in shown.stdout
    raw = invoke("show", row.id, "--json")
    trajectory = json.loads(raw.stdout)
    assert list(trajectory)[:2] == ["kind", "version"] and trajectory["kind"] == "trajectory"
    assert trajectory["version"] == 5 and trajectory["task_id"] == row.task_id
    first = trajectory["calls"][0]["messages"]  # AgentBench's prompt as a user turn, its "Ok."
    assert [m["role"] for m in first[:3]] == ["user", "assistant", "user"]
    missing = invoke("show", "ffffffff")
    assert missing.exit_code != 0


def test_a_harness_that_raises_is_recorded_and_the_run_goes_on(workspace):
    make_variant(
        workspace,
        "crashy",
        "return messages + self.history(state)",
        "raise RuntimeError('boom in build_context')",
    )
    result, data = eval_json("crashy", "--rollouts", 1, *task_flags(TASKS[:3]))
    assert result.exit_code == 1  # every rollout a harness_error: said plainly (issue #28)
    assert data["summary"]["outcomes"] == {"harness_error": 3}
    assert "every rollout (3) ended in harness_error" in result.stderr
    assert "boom in build_context" in result.stderr
    stored = rows(workspace)
    assert all("boom in build_context" in (r.error or "") for r in stored)


def test_a_harness_that_does_not_compile_is_refused_before_any_rollout(workspace):
    """Found by compiling (no code runs), not by running and caching failed rollouts."""
    make_variant(
        workspace,
        "broken",
        "return messages + self.history(state)",
        "return messages + (",
    )
    result = invoke("eval", "broken", "--rollouts", 1, *task_flags(TASKS[:3]))
    assert result.exit_code == 2, result.output
    assert "harness.py:" in result.stderr and "does not compile" in result.stderr
    assert rows(workspace) == []


@pytest.mark.slow
def test_a_harness_that_loops_forever_is_killed_at_the_timeout(workspace):
    make_variant(
        workspace, "loopy", "action = ACTION.search(reply)", "while True:\n            pass"
    )
    result, data = eval_json("loopy", "--rollouts", 1, "--timeout", 3, *task_flags(TASKS[:2]))
    assert result.exit_code == 0
    assert data["summary"]["outcomes"] == {"timeout": 2}
    assert all(r.wall_s < 20 for r in rows(workspace))


def test_a_reply_over_the_token_budget_is_a_context_limit(workspace):
    result, data = eval_json(
        "dbbench-base", "--rollouts", 1, "--max-tokens", 300, *task_flags(TASKS[:2])
    )
    assert result.exit_code == 0
    assert data["summary"]["outcomes"] == {"context_limit": 2}
    calls = load_workspace(workspace).open_store().calls(rows(workspace)[0].id)
    assert calls[-1].status == "budget_exceeded"


def test_the_sandbox_sees_no_secrets(workspace, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-leak")
    monkeypatch.setenv("HARNESSCTL_SECRET_THING", "hx-should-never-leak")
    make_variant(
        workspace,
        "snoop",
        "return state.answer",
        "import os\n        return repr(sorted(os.environ.items()))",
    )
    eval_json("snoop", "--rollouts", 1, *task_flags(TASKS[:1]))
    trajectory = load_workspace(workspace).open_store().trajectory(rows(workspace)[0])
    seen = trajectory.result.answer
    assert "HXRT_TOKEN" in seen  # the harness did dump its environment
    assert "sk-should-never-leak" not in seen and "hx-should-never-leak" not in seen
    assert "OPENAI_API_KEY" not in seen


def test_a_broken_task_record_is_named_and_the_rest_run(workspace):
    suite = workspace / "examples" / "dbbench"
    lines = (suite / "dev.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["table"]["table_info"]["columns"]
    lines[1] = json.dumps(broken)
    lines[2] = "{not json"
    (suite / "dev.jsonl").write_text("\n".join(lines[:6]) + "\n")
    result = invoke("eval", "dbbench-base", "--rollouts", 1)
    assert result.exit_code == 1
    assert "dev.jsonl:2" in result.stderr and "dev.jsonl:3" in result.stderr
    assert len(rows(workspace)) == 4


def test_malformed_harness_yaml_exits_nonzero_naming_the_field(workspace):
    path = workspace / "harnesses" / "dbbench-base" / "harness.yaml"
    path.write_text(path.read_text() + "max_steps: 3\n")
    result = invoke("eval", "dbbench-base", *task_flags(TASKS[:1]))
    assert result.exit_code == 2
    assert "harness.yaml: max_steps" in result.stderr


@pytest.mark.slow
@pytest.mark.slow
def test_full_dev_split_with_the_offline_policy(workspace):
    result, data = eval_json("dbbench-base", "--rollouts", 1, "--workers", 2)
    assert result.exit_code == 0
    summary = data["summary"]
    assert summary["tasks"] == 60 and summary["rollouts"] == 60
    # the plain harness must work, yet leave failures for repair directions to fix
    assert 0.2 < summary["success_rate"] < 0.8
    assert len(summary["outcomes"]) >= 3


@pytest.mark.parametrize(
    ("command", "option", "value"),
    [
        ("eval", "--timeout", "0"),
        ("eval", "--timeout", "-1"),
        ("eval", "--max-calls", "0"),
        ("eval", "--max-tokens", "0"),
        ("eval", "--seed", "-5"),
        ("eval", "--rollouts", "0"),
        ("evolve", "--batch", "0"),
        ("evolve", "--batch", "-3"),
        ("evolve", "--alpha", "1.5"),
        ("evolve", "--alpha", "0"),
        ("evolve", "--max-editor-cost", "0"),
        ("profile", "--seed", "-1"),
        ("export-edits", "--test-fraction", "1.5"),
    ],
)
def test_nonsensical_limits_are_refused_naming_the_option(workspace, command, option, value):
    result = invoke(command, "dbbench-base", option, value)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output
    assert rows(workspace) == []  # refused before anything ran


@pytest.mark.slow
def test_an_eval_whose_rollouts_all_fail_on_infrastructure_exits_3_and_says_so(workspace):
    from tests.helpers.openai_stub import Fail, OpenAIStub

    # the server is up (a dead one is refused before any rollout: test_preflight.py) but
    # every generation fails with a 503, retried, then an infrastructure failure
    with OpenAIStub(default=Fail(503, "overloaded")) as stub:
        args = ["eval", "dbbench-base", "--policy", "openai/x", "--param", f"api_base={stub.url}"]
        result = invoke(*args, "--param", "api_key=k", "--task", "dev-000", "--rollouts", 1)
    assert result.exit_code == 3, result.output
    assert "no rollout finished: nothing to summarise" in result.stdout
    assert "0.0% (0/0)" not in result.stdout
    assert "1 rollout(s) failed on infrastructure" in result.stderr
    assert rows(workspace) == []
    listed = invoke("rollouts", "--attempts", "--json")
    attempts = json.loads(listed.stdout[listed.stdout.index("{") :])["attempts"]
    assert attempts and all(a["outcome"] == "infra_error" and a["error"] for a in attempts)


def test_the_hint_eval_prints_is_a_command_that_works(workspace):
    result = invoke("eval", "dbbench-base", "--task", "dev-000", "--rollouts", 1)
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if "its rollouts: harnessctl" in x)
    hint = line.split("its rollouts: harnessctl ", 1)[1].split(" (then", 1)[0]
    listed = invoke(*hint.split())
    assert listed.exit_code == 0 and rows(workspace)[0].id[:12] in listed.stdout
