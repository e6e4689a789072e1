"""tau2's natural-language assertions judged by a model (``env_options: judge``): tau2's own
judge prompt and verdict parsing, the call made through the episode's model access. In
process with a scripted access (the verdicts decide the reward where the task's basis holds
``NL_ASSERTION``; a malformed or short answer is an infrastructure error, never a pass), and
through the whole rollout path with ``harnessctl eval`` against tests/helpers/openai_stub.py (a real
OpenAI-compatible server on loopback): recorded as ``env:judge``, outside the agent's budget,
its key stored nowhere. ~20 s."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import yaml

try:
    import tau2  # noqa: F401  (the `tau2` extra; .ci/run installs it)
except ImportError:  # CI must run these: it fails there instead of skipping
    if os.environ.get("CI"):
        raise
    pytest.skip("pip install -e '.[tau2]' to run these", allow_module_level=True)

from harnessctl.envs import ModelAccess, ModelReply, get_environment
from harnessctl.envs.tau2.judge import JudgeError
from harnessctl.envs.tau2.package import domain_tasks
from harnessctl.workspace import load_workspace
from tests.helpers.cli import cli, cli_json
from tests.helpers.openai_stub import OpenAIStub, Reply
from tests.helpers.tau2 import replay as _replay
from tests.helpers.workspaces import isolated_workspace

pytestmark = pytest.mark.timeout(300)

SECRET = "sk-judge-secret-7731"
JUDGE = "openai/gpt-4o-mini"


def airline_24() -> dict:
    """tau2's airline test task 24 as JSON: three NL assertions, basis DB + COMMUNICATE."""
    (task,) = [t for t in domain_tasks("airline", "test") if str(t.id) == "24"]
    return task.model_dump(mode="json")


def verdict_json(assertions: list[str], met: list[bool]) -> str:
    results = [
        {"expectedOutcome": a, "reasoning": "as the conversation shows", "metExpectation": m}
        for a, m in zip(assertions, met, strict=True)
    ]
    return json.dumps({"results": results})


class _Judge(ModelAccess):
    """A scripted judge access: answers every call with ``answer(messages)``."""

    def __init__(self, answer) -> None:
        self.answer, self.seen = answer, []

    def complete(self, messages, *, purpose, model, tools=None, **params):
        self.seen.append((messages, purpose, model, params))
        return ModelReply(self.answer(messages), cost_usd=0.002)


@pytest.mark.slow
def test_the_judges_verdicts_count_where_the_basis_holds_nl_assertions():
    body = airline_24()
    assertions = body["evaluation_criteria"]["nl_assertions"]
    judged = copy.deepcopy(body)
    judged["evaluation_criteria"]["reward_basis"].append("NL_ASSERTION")
    env = get_environment("tau2", judge="openai/j", judge_params={"api_base": "http://j"})
    plain, with_nl = (
        env.task_from_record({"domain": "airline", "split": "test", "task": b})
        for b in (body, judged)
    )
    all_met = _Judge(lambda _: verdict_json(assertions, [True] * len(assertions)))
    score = _replay(env, with_nl, all_met)
    assert score.success and score.detail["breakdown"]["NL_ASSERTION"] == 1.0
    assert [v["met"] for v in score.detail["nl_assertions"]] == [True, True, True]
    # tau2's own judge prompt: the conversation and the expected outcomes, one call
    ((messages, purpose, model, params),) = all_met.seen
    assert (purpose, model) == ("judge", "openai/j")
    assert params == {"temperature": 0.0, "api_base": "http://j"}
    assert messages[0]["role"] == "system" and "expected outcomes" in messages[0]["content"]
    assert assertions[1] in messages[1]["content"] and "HAT069" in messages[1]["content"]

    one_unmet = _Judge(lambda _: verdict_json(assertions, [True, False, True]))
    failed = _replay(env, with_nl, one_unmet)
    assert not failed.success and failed.detail["reward"] == 0.0
    # the same verdict on tau2's own basis (DB + COMMUNICATE): reported, not counted
    reported = _replay(env, plain, one_unmet)
    assert reported.success and [v["met"] for v in reported.detail["nl_assertions"]] == [
        True,
        False,
        True,
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "answer, said",
    [
        ("The agent did well.", "not the verdicts"),
        (json.dumps({"results": []}), r"gave 0 verdict\(s\) for 3"),
        (json.dumps({"results": [{"metExpectation": True}]}), "not the verdicts"),
    ],
)
def test_a_judge_answer_that_is_not_the_verdicts_never_passes(answer, said):
    env = get_environment("tau2", judge="openai/j")
    body = airline_24()
    body["evaluation_criteria"]["reward_basis"].append("NL_ASSERTION")
    task = env.task_from_record({"domain": "airline", "split": "test", "task": body})
    with pytest.raises(JudgeError, match=said):
        _replay(env, task, _Judge(lambda _: answer))


def test_nl_assertions_in_the_basis_without_a_judge_name_the_option():
    env = get_environment("tau2")
    body = airline_24()
    body["evaluation_criteria"]["reward_basis"].append("NL_ASSERTION")
    task = env.task_from_record({"domain": "airline", "split": "test", "task": body})
    with pytest.raises(ValueError, match="env_options: judge"):
        _replay(env, task, None)
    with pytest.raises(ValueError, match="judge_params apply to a judge model only"):
        get_environment("tau2", judge_params={"temperature": 1})
    with pytest.raises(ValueError, match="judge_params must be a mapping"):
        get_environment("tau2", judge="openai/j", judge_params=["x"])


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    with isolated_workspace(tmp_path / "home", root, workers=1):
        yield root


def write_suite(ws: Path, stub: OpenAIStub) -> str:
    suite = ws / "suites" / "tau2-judge"
    (suite / "tasks").mkdir(parents=True)
    (suite / "tasks" / "airline.yaml").write_text("domain: airline\nsplit: test\nids: ['24']\n")
    config = {
        "name": "tau2-judge",
        "env": "tau2",
        "tasks": ["tasks"],
        "timeout_s": 300,
        "env_options": {"judge": JUDGE, "judge_params": {"api_base": stub.url, "api_key": SECRET}},
    }
    (suite / "suite.yaml").write_text(yaml.safe_dump(config))
    return str(suite.relative_to(ws))


@pytest.mark.slow
def test_the_judge_is_called_through_the_rollout_path_and_recorded_apart(ws):
    assertions = airline_24()["evaluation_criteria"]["nl_assertions"]
    with OpenAIStub() as stub:
        stub.reply(verdict_json(assertions, [True, True, True]), prompt_tokens=1200)
        suite = write_suite(ws, stub)
        out = cli_json(
            ws,
            *("eval", "tau2-base", "--suite", suite, "--rollouts", 1),
            *("--policy", "replay/tau2", "--max-calls", 2),
        )
        requests = stub.chat_requests
    assert out["summary"]["outcomes"] == {"success": 1}, out["summary"]
    (request,) = requests
    assert request.headers.get("authorization") == f"Bearer {SECRET}"
    assert request.body["model"] == "gpt-4o-mini" and request.body.get("temperature") == 0
    assert "expectedOutcomes" in request.body["messages"][1]["content"]
    store = load_workspace(ws).open_store()
    (row,) = store.rollouts()
    assert row.model_calls == 2  # the agent's; the judge's call is the environment's
    trajectory = store.trajectory(row)
    assert [c.caller for c in trajectory.env_calls] == ["env:judge"]
    assert trajectory.env_calls[0].prompt_tokens == 1200
    assert trajectory.env_calls[0].params.get("api_key") == "***"
    verdicts = trajectory.score.detail["nl_assertions"]
    assert [v["met"] for v in verdicts] == [True, True, True]
    assert store.call_totals(rollout_id=row.id)["env:judge"].calls == 1
    for path in (ws / ".harnessctl").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_a_judge_that_answers_nonsense_is_an_infra_error_of_the_rollout(ws):
    with OpenAIStub() as stub:
        stub.default = Reply("I think the agent was fine.")
        suite = write_suite(ws, stub)
        result = cli(
            ws,
            *("eval", "tau2-base", "--suite", suite, "--rollouts", 1),
            *("--policy", "replay/tau2"),
            code=None,
        )
        asked = len(stub.chat_requests)
    said = result.stdout + (result.stderr if result.stderr_bytes is not None else "")
    assert asked == 3, said  # judged once per attempt: the rollout was retried twice
    store = load_workspace(ws).open_store()
    assert store.rollouts() == []  # no outcome recorded against the harness
    attempts = store.attempts()
    assert len(attempts) == 3
    assert all("not the verdicts tau2 asks for" in (a.error or "") for a in attempts), [
        a.error for a in attempts
    ]
    assert SECRET not in said
