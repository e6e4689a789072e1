"""One call log: every model call (a rollout's, an infra-failed attempt's, an LLM editor's,
a voter's) is a model_call row with its purpose, owner and cost, and no secret."""

from __future__ import annotations

import json
import socket

import pytest

from harnessctl.evolve.directions import catalogue
from harnessctl.evolve.editors import LLMEditor
from harnessctl.evolve.engine import Engine, EvolveRequest
from harnessctl.harness import load_harness
from harnessctl.policy import Policy
from harnessctl.profiles.router import route
from harnessctl.profiles.voting import Voter, record_vote_calls
from harnessctl.run.evaluate import EvalRequest, evaluate
from harnessctl.sandbox import Limits
from harnessctl.suite import load_suite
from harnessctl.workspace import load_workspace
from tests.helpers.evolve import committed_workspace_eval
from tests.helpers.openai_stub import Fail, OpenAIStub, Reply
from tests.helpers.profiles import routable_profile

SECRET = "sk-test-not-a-real-key"
ANCHOR = "        return messages + self.history(state)\n"
NOT_APPLYING = (
    "harness.py\n<<<<<<< SEARCH\n        return something_else()\n=======\n"
    "        return 1\n>>>>>>> REPLACE\n"
)
GOOD = (
    f"harness.py\n<<<<<<< SEARCH\n{ANCHOR}=======\n"
    "        messages = messages + self.history(state)\n"
    "        return messages\n>>>>>>> REPLACE\n"
)


def no_secret(rows) -> bool:
    return all(SECRET not in (r.params_json or "") + (r.error or "") for r in rows)


@pytest.mark.slow
def test_llm_editor_calls_are_logged_with_their_edit(workspace):
    ws, base, evaluation = committed_workspace_eval(workspace, split="test", timeout_s=20)
    store = ws.open_store()
    with OpenAIStub() as stub:
        stub.push(
            Reply(NOT_APPLYING, prompt_tokens=300, completion_tokens=40),
            Reply(GOOD, prompt_tokens=400, completion_tokens=60),
        )
        editor = LLMEditor("openai/editor-model", {"api_base": stub.url, "api_key": SECRET})
        request = EvolveRequest(
            base=base,
            eval=evaluation,
            directions=[catalogue("dbbench")["termination"]],
            editor=editor,
            rounds=1,
            batch_size=4,
            control_size=4,
            alpha=1.0,
            min_net=0,
            editor_retries=1,
        )
        result = Engine(request, ws, store).run()
    edits = result.edits
    assert [e.reason for e in edits][:1] == ["does_not_apply"] and len(edits) == 2
    calls = store.calls(purpose="editor")
    assert [(c.edit_id, c.prompt_tokens, c.completion_tokens) for c in calls] == [
        (edits[0].id, 300, 40),
        (edits[1].id, 400, 60),
    ]
    assert all(c.rollout_id is None and c.status == "ok" for c in calls)
    assert calls[1].reply == GOOD
    assert json.loads(calls[0].params_json)["api_key"] == "***" and no_secret(calls)
    assert [c.id for c in store.calls(edit_id=edits[1].id)] == [calls[1].id]
    totals = store.call_totals()
    assert (totals["editor"].calls, totals["editor"].total_tokens) == (2, 800)
    assert totals["editor"].cost_usd == sum(e.cost_usd for e in edits)
    # the sim policy's rollouts are in the same log, as policy calls of stored rollouts
    policy_calls = store.calls(purpose="policy")
    assert (
        totals["policy"].calls == len(policy_calls) == sum(r.model_calls for r in store.rollouts())
    )
    assert all(c.rollout_id and c.run_id for c in policy_calls)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_voter_calls_are_logged_answered_or_failed(tmp_path):
    from harnessctl.store import Store

    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "trajectories")
    pool = {name: routable_profile(name, (3, 10)) for name in ("a", "b")}
    params = {"api_key": SECRET}
    with OpenAIStub() as stub:
        stub.push(
            Reply('{"ranking": ["b", "a"]}', prompt_tokens=70, completion_tokens=9),
            Reply("no idea", prompt_tokens=60, completion_tokens=3),
        )
        voters = [
            Voter("openai/vote-a", {**params, "api_base": stub.url}),
            Voter("openai/garbage", {**params, "api_base": stub.url}),
            Voter("openai/down", {**params, "api_base": f"http://127.0.0.1:{_closed_port()}/v1"}),
        ]
        result = route(
            pool, task_id="t", category="c", failure_outcomes=["step_limit"], voters=voters
        )
    record_vote_calls(store, result.votes, run_id="run-7")
    calls = {c.model.split("/")[-1]: c for c in store.calls(purpose="voter")}
    assert len(calls) == 3
    voted = next(c for c in calls.values() if c.prompt_tokens == 70)
    assert voted.status == "ok" and voted.completion_tokens == 9 and voted.run_id == "run-7"
    unusable = next(c for c in calls.values() if c.prompt_tokens == 60)
    assert unusable.status == "ok"  # the call answered; only its ranking was unusable
    down = [c for c in calls.values() if c.status != "ok"]
    assert len(down) == 1 and down[0].status == "upstream_error" and down[0].error
    assert no_secret(calls.values())
    assert store.call_totals(run_id="run-7")["voter"].total_tokens == 70 + 9 + 60 + 3
    store.close()


def test_an_infra_failed_attempt_keeps_its_calls(workspace):
    store = load_workspace(workspace).open_store()
    operation = "Action: Operation\n```sql\nSELECT COUNT(*) FROM `Game Schedule`\n```"
    answer = 'Action: Answer\nFinal Answer: ["1.0"]'
    with OpenAIStub() as stub:
        stub.push(
            Reply(operation, prompt_tokens=100, completion_tokens=20),  # attempt 1: answered,
            Fail(500, "upstream down"),  # then the provider fails: infra_error, retried
            Reply(operation, prompt_tokens=100, completion_tokens=20),  # attempt 2
            Reply(answer, prompt_tokens=120, completion_tokens=10),
        )
        policy = Policy("openai/stub-model", {"api_base": stub.url, "api_key": SECRET})
        request = EvalRequest(
            harness=load_harness(workspace / "harnesses" / "dbbench-base"),
            suite=load_suite(workspace / "examples" / "dbbench"),
            split="dev",
            policy=policy,
            rollouts=1,
            workers=1,
            task_ids=["dev-004"],
            limits=Limits(timeout_s=30),
            retries=1,
            upstream_retries=0,
        )
        result = evaluate(request, store)
    (row,) = result.rows
    assert row.attempts == 2 and row.model_calls == 2
    (attempt,) = store.attempts()
    failed = store.calls(attempt_id=attempt.id)
    assert [(c.idx, c.status, c.prompt_tokens) for c in failed] == [
        (0, "ok", 100),
        (1, "upstream_error", 0),
    ]
    assert all(c.rollout_id is None and c.run_id == result.run_id for c in failed)
    assert [c.prompt_tokens for c in store.calls(row.id)] == [100, 120]
    totals = store.call_totals(run_id=result.run_id)
    assert (totals["policy"].calls, totals["policy"].prompt_tokens) == (4, 320)
    assert no_secret(store.calls())
