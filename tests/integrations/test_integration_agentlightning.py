"""Agent Lightning (harnessctl.integrations.agentlightning) through its own runner and store.

``agentlightning`` 0.3.0 installs beside ART in the environment .ci/run makes for ART (it
needs ``litellm[proxy]>=1.74``, ART ``litellm<=1.82``; the project's own environment resolves
a newer litellm), where this file runs with ``HARNESSCTL_TEST_AGL=1`` and must pass;
elsewhere it is skipped. Agent Lightning's real ``LitAgentRunner`` runs the agent on a task
row from its real ``InMemoryLightningStore``, with an ``LLM`` resource on the OpenAI stub;
the pool is a real exported one."""

from __future__ import annotations

import asyncio
import os

import pytest

from harnessctl.pool import Pool
from tests.helpers.openai_stub import OpenAIStub
from tests.helpers.pools import dbbench_record, dbbench_turns, vllm_reply

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")

#: read at import: the autouse isolation fixture clears HARNESSCTL_* variables
AGL = bool(os.environ.get("HARNESSCTL_TEST_AGL"))
MODEL = "Qwen/Qwen2.5-7B-Instruct"


@pytest.fixture(scope="module")
def agl():
    if not AGL:
        pytest.skip("runs in ART's environment, where agentlightning installs (.ci/run)")
    try:
        import agentlightning
    except ImportError as exc:
        pytest.fail(f"HARNESSCTL_TEST_AGL is set but agentlightning does not import: {exc}")
    return agentlightning


def seeded(req):
    return 10_000 * req.get("seed", 0)


def run_row(agl, pool, row, llm):
    from harnessctl.integrations.agentlightning import HarnessAgent

    agent = HarnessAgent(pool)
    runner = agl.LitAgentRunner(tracer=agl.OtelTracer(), poll_interval=0.1)
    store = agl.InMemoryLightningStore()
    runner.init(agent)
    runner.init_worker(0, store)
    try:

        async def go():
            rollout = await runner.step(row, resources={"main_llm": llm}, mode="train")
            spans = await store.query_spans(rollout.rollout_id)
            return rollout, spans

        rollout, spans = asyncio.run(go())
    finally:
        runner.teardown_worker(0)
        runner.teardown()
    return agent, rollout, spans


def test_a_pool_harness_runs_as_an_agent_lightning_agent(agl, small_pool):
    ws, out, names = small_pool
    sibling = next(n for n in names if n != "dbbench-base")
    row = {
        "data_id": "d1",
        "harnessctl_task": dbbench_record(ws, 4),
        "harnessctl_harness": sibling,
        "harnessctl_seed": 7,
    }
    with OpenAIStub(vllm_reply(dbbench_turns, offset=seeded)) as stub, Pool.load(out) as pool:
        llm = agl.LLM(endpoint=stub.url, model=MODEL, sampling_parameters={"temperature": 0.7})
        agent, rollout, spans = run_row(agl, pool, row, llm)
        bodies = [r.body for r in stub.chat_requests]
    output = agent.last_output
    assert rollout.status == "succeeded"
    assert output.harness == sibling and output.seed == 7 and output.success
    assert agl.find_final_reward(spans) == output.reward == 1.0  # the reward Agent Lightning keeps
    assert {b["model"] for b in bodies} == {MODEL} and {b["temperature"] for b in bodies} == {0.7}
    assert all(b["return_token_ids"] and b["logprobs"] for b in bodies)
    seq = output.tokens()  # the tokens the trainer's proxy sees are this rollout's
    assert seq.append_only and seq.response_ids[0] >= 10_000 * 7


def test_the_base_harness_by_default_and_a_row_without_a_task_refused(agl, small_pool):
    ws, out, _ = small_pool
    with OpenAIStub(vllm_reply(dbbench_turns)) as stub, Pool.load(out) as pool:
        llm = agl.LLM(endpoint=stub.url, model=MODEL)
        agent, rollout, _ = run_row(agl, pool, {"harnessctl_task": dbbench_record(ws, 4)}, llm)
        assert agent.last_output.harness == "dbbench-base" and rollout.status == "succeeded"
        with pytest.raises(KeyError, match="harnessctl_task"):
            run_row(agl, pool, {"data_id": "x"}, llm)
