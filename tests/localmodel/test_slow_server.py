"""A model server on this machine that is slow but alive (issue 51: llama.cpp on busy cores):
its calls are sent once and waited for, its rollouts end in model outcomes, and the
model-call timeout is a run setting that never decides the cache.

The server is the OpenAI-compatible stub on loopback, slow on purpose (``Hang``); the
rollouts run in real sandboxes through a real gateway and litellm."""

from __future__ import annotations

import json

import pytest

from harnessctl.gateway import Budget, Gateway
from harnessctl.harness import load_harness
from harnessctl.policy import Policy
from harnessctl.run.evaluate import MODEL_TIMEOUT_KEY
from harnessctl.run.session import RolloutSession
from harnessctl.runtime.client import GatewayClient
from harnessctl.sandbox import Limits
from harnessctl.suite import load_suite
from harnessctl.workspace import load_workspace
from tests.helpers import ROOT
from tests.helpers.cli import cli, cli_json
from tests.helpers.gateway import ASK, MODEL, fake_completer
from tests.helpers.openai_stub import Hang, OpenAIStub, Reply

SQL = "Action: Operation\n```sql\nSELECT COUNT(*) FROM `Game Schedule`\n```"
ANSWER = 'Action: Answer\nFinal Answer: ["1.0"]'
MODEL_OUTCOMES = {"success", "wrong_answer", "invalid_format", "invalid_action", "tool_error",
                  "step_limit", "context_limit"}  # fmt: skip


def test_the_runtime_waits_for_a_reply_as_long_as_the_gateway_does():
    """The sandbox's client bounds reaching the gateway, not the model's reply: a reply
    slower than its timeout still arrives (a shorter wait of its own abandoned calls the
    host was still making, and the rollout ended harness_error)."""
    completer = fake_completer("slow but here", delay=1.2)
    with Gateway(completer=completer) as gw:
        token = gw.open_rollout("r1", model=MODEL, params={}, budget=Budget())
        reply = GatewayClient(gw.address, token, timeout_s=0.3).chat(ASK)
        gw.close_rollout(token)
    assert reply.content == "slow but here"


def rollout(stub: OpenAIStub, model_timeout_s: float | None):
    suite = load_suite(ROOT / "examples" / "dbbench")
    task = suite.tasks("dev").by_id()["dev-004"]
    harness = load_harness(ROOT / "harnesses" / "dbbench-base")
    policy = Policy("openai/local-model", {"api_base": stub.url, "api_key": "x"})
    session = RolloutSession(suite.environment, limits=Limits(), model_timeout_s=model_timeout_s)
    with session:
        return session.run(harness, task, 0, policy)


@pytest.mark.slow  # waits on purpose: two replies of 2 s
def test_a_slow_local_server_gives_model_outcomes_each_call_sent_once():
    """Every reply takes 2 s, far longer than the stub's others: the calls are waited for,
    none is sent twice, and the rollout ends in a model outcome (that the wait is not the
    harness's time: tests/run/test_time_limit.py)."""
    with OpenAIStub(default=Hang(2, Reply(ANSWER))) as stub:
        stub.push(Hang(2, Reply(SQL)))
        rec = rollout(stub, model_timeout_s=30)
        sent = len(stub.chat_requests)
    assert rec.outcome.value in MODEL_OUTCOMES, rec.error
    calls = rec.trajectory.calls
    assert len(calls) == sent >= 2 and all(c.attempts == 1 for c in calls)
    assert sum(c.latency_s for c in calls) >= 2 * sent


def test_a_local_call_past_the_model_timeout_is_the_host_s_infra_error_sent_once():
    """Slower than the run's model-call timeout: the gateway gives up once, without sending
    the call again, and the host records the failure itself: infra_error (retried by the
    run, never a task failure), not harness_error."""
    with OpenAIStub(default=Hang(3, Reply(ANSWER))) as stub:
        rec = rollout(stub, model_timeout_s=0.5)
        sent = len(stub.chat_requests)
    assert rec.outcome.value == "infra_error", rec.error
    assert "not sent again" in (rec.error or "")
    [call] = rec.trajectory.calls
    assert sent == 1 and call.attempts == 1
    assert call.latency_s < 3  # given up at the timeout, not answered at 3 s


def test_the_model_timeout_is_a_run_setting_recorded_and_not_in_the_cache_key(workspace):
    base = ["eval", "dbbench-base", "--split", "dev", "--task", "dev-004", "--rollouts", 1]
    first = cli_json(workspace, *base, "--model-timeout", "42")
    assert first["executed"] == 1
    again = cli_json(workspace, *base, "--model-timeout", "7")
    assert (again["cached"], again["executed"]) == (1, 0)  # the same rollout: served
    store = load_workspace(workspace).open_store()
    recorded = [json.loads(r.params_json) for r in store.runs()]
    assert sorted(r.get(MODEL_TIMEOUT_KEY) for r in recorded) == [7.0, 42.0]


def test_the_model_timeout_comes_from_the_flag_the_environment_or_the_workspace(
    workspace, monkeypatch
):
    from harnessctl.cli.options import model_timeout

    ws = load_workspace(workspace)
    assert model_timeout(ws) is None  # the endpoint's default
    (workspace / "harnessctl.yaml").write_text("suite: examples/dbbench\nmodel_timeout_s: 900\n")
    ws = load_workspace(workspace)
    assert model_timeout(ws) == 900
    monkeypatch.setenv("HARNESSCTL_MODEL_TIMEOUT", "1200")
    assert model_timeout(ws) == 1200  # env over YAML
    assert model_timeout(ws, 30.0) == 30.0  # the flag over both


@pytest.mark.parametrize(
    ("setting", "where"),
    [
        (("--model-timeout", "0"), "--model-timeout"),
        (("--model-timeout", "nan"), "--model-timeout"),
        ("env:soon", "HARNESSCTL_MODEL_TIMEOUT"),
        ("yaml:-5", "model_timeout_s"),
    ],
)
def test_a_bad_model_timeout_is_refused_naming_where_it_came_from(
    workspace, monkeypatch, setting, where
):
    args = ["eval", "dbbench-base", "--split", "dev", "--task", "dev-004", "--rollouts", 1]
    if isinstance(setting, tuple):
        args += list(setting)
    elif setting.startswith("env:"):
        monkeypatch.setenv("HARNESSCTL_MODEL_TIMEOUT", setting[4:])
    else:
        (workspace / "harnessctl.yaml").write_text(f"model_timeout_s: {setting[5:]}\n")
    result = cli(workspace, *args, code=2)
    assert where in result.output, result.output
    (workspace / "harnessctl.yaml").write_text("suite: examples/dbbench\n")
    monkeypatch.delenv("HARNESSCTL_MODEL_TIMEOUT", raising=False)
    assert not load_workspace(workspace).open_store().rollouts()  # nothing ran
