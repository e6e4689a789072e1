"""evaluate() as a library: infrastructure failures, interruption and resume, a real model
endpoint (a local OpenAI-compatible server) through the same path as the sim."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harnessctl.policy import Policy
from harnessctl.run.evaluate import evaluate
from harnessctl.sandbox import Limits
from harnessctl.workspace import load_workspace
from tests.helpers.evals import eval_request as request
from tests.helpers.openai_stub import Fail, OpenAIStub, Reply


@pytest.mark.slow
def test_upstream_failure_is_an_infra_error_not_a_task_failure(workspace):
    store = load_workspace(workspace).open_store()
    with OpenAIStub(default=Fail(500, "upstream down")) as stub:
        policy = Policy("openai/stub-model", {"api_base": stub.url, "api_key": "dummy"})
        result = evaluate(
            request(workspace, policy, retries=1, upstream_retries=1, upstream_backoff_s=0.0), store
        )
        assert len(stub.chat_requests) == 3 * 2 * 2  # tasks x sandbox attempts x upstream tries
    assert len(result.infra_failed) == 3
    assert result.rows == [] and store.rollouts() == []
    attempts = store.attempts()
    assert len(attempts) == 6 and {a.outcome for a in attempts} == {"infra_error"}
    assert all("upstream down" in (a.error or "") for a in attempts)


def test_a_real_endpoint_policy_goes_through_the_same_path(workspace):
    store = load_workspace(workspace).open_store()
    script = [
        "Action: Operation\n```sql\nSELECT COUNT(*) FROM `Game Schedule`\n```",
        'Action: Answer\nFinal Answer: ["1.0"]',
    ]
    with OpenAIStub() as stub:
        stub.push(*(Reply(text, prompt_tokens=100, completion_tokens=20) for text in script))
        policy = Policy("openai/stub-model", {"api_base": stub.url, "api_key": "dummy"})
        result = evaluate(request(workspace, policy, task_ids=["dev-004"], workers=1), store)
        sent = stub.chat_requests
    row = result.rows[0]
    assert row.model_calls == 2 and row.prompt_tokens == 200 and row.completion_tokens == 40
    assert row.outcome in ("success", "wrong_answer")
    first = sent[0].body["messages"]
    assert first[0]["role"] == "user" and "Final Answer" in first[0]["content"]  # AgentBench
    assert "dummy" not in str(store.trajectory(row).calls[0].params)  # keys redacted


@pytest.mark.slow
def test_a_killed_run_resumes_without_redoing_finished_rollouts(workspace):
    cmd = [
        sys.executable,
        "-m",
        "harnessctl.cli",
        "eval",
        "dbbench-base",
        "--rollouts",
        "3",
        "--workers",
        "1",
        "--json",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=workspace,
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    store = load_workspace(workspace).open_store()
    deadline = time.time() + 120
    while time.time() < deadline and len(store.rollouts()) < 3:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {r.cache_key for r in store.rollouts()}
    assert len(before) >= 3
    [killed] = [r.run_id for r in store.rollouts()][:1]
    assert store.run(killed).status == "running" and store.claims(killed)  # as left
    again = request(workspace, Policy("sim/dbbench"), rollouts=3, task_ids=None, limits=Limits())
    result = evaluate(again, store)  # the CLI's default budgets: the same cache keys
    assert store.run(killed).status == "died"  # marked on the next start, by its pid
    assert store.claims() == []  # its claims taken over, then released at the end
    assert result.cached == len(before)
    assert result.executed == 180 - len(before)
    keys = [r.cache_key for r in store.rollouts()]
    assert len(keys) == len(set(keys)) == 180


def test_a_result_under_other_budgets_is_not_served_from_the_cache(workspace):
    store = load_workspace(workspace).open_store()
    policy = Policy("sim/dbbench")
    starved = evaluate(request(workspace, policy, task_ids=["dev-009"], max_calls=1), store)
    assert [r.outcome for r in starved.rows] == ["context_limit"] and starved.executed == 1
    plain = evaluate(request(workspace, policy, task_ids=["dev-009"]), store)
    assert plain.cached == 0 and plain.executed == 1  # a looser budget runs afresh
    assert plain.rows[0].outcome != "context_limit"
    short = evaluate(
        request(workspace, policy, task_ids=["dev-009"], limits=Limits(timeout_s=29)), store
    )
    assert short.cached == 0 and short.executed == 1  # every limit is part of the key
    again = evaluate(request(workspace, policy, task_ids=["dev-009"], max_calls=1), store)
    assert again.cached == 1 and again.rows[0].outcome == "context_limit"  # same budget: cached


def test_a_refused_policy_parameter_stops_the_run_and_stores_no_outcome(workspace):
    import pytest

    from harnessctl.errors import ConfigError

    store = load_workspace(workspace).open_store()
    refusal = Fail(
        400, "Unrecognized request argument supplied: skill", type="invalid_request_error"
    )
    with OpenAIStub(default=refusal) as stub:
        policy = Policy("openai/stub-model", {"api_base": stub.url, "api_key": "k", "skill": 2})
        with pytest.raises(ConfigError, match="refused this run's configuration.*skill"):
            evaluate(request(workspace, policy, workers=1), store)
        assert len(stub.chat_requests) <= 3  # a call, its probe, at most one more in flight
    assert store.rollouts() == []  # no task outcome stored
    attempts = store.attempts()
    assert {a.outcome for a in attempts} == {"infra_error"}
    assert store.run(attempts[0].run_id).status == "failed"


@pytest.mark.slow
def test_two_concurrent_evals_on_one_store_execute_each_rollout_once(workspace):
    tasks = [
        x for t in ["dev-000", "dev-004", "dev-020", "dev-030", "dev-045"] for x in ("--task", t)
    ]
    cmd = [sys.executable, "-m", "harnessctl.cli", "eval", "dbbench-base", "--rollouts", "2"]
    cmd += ["--workers", "1", *tasks, "--json"]
    procs = [
        subprocess.Popen(
            cmd, cwd=workspace, env=os.environ.copy(), stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    results = [json.loads(out[out.index("{") :]) for out in outs]
    assert sum(r["executed"] for r in results) == 10  # each rollout executed once in all
    assert all(r["executed"] + r["cached"] == 10 for r in results)  # each saw all ten
    store = load_workspace(workspace).open_store()
    assert len(store.rollouts()) == 10 and store.claims() == []
