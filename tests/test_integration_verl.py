"""verl integration (harnessctl.integrations.verl) through verl's own types.

verl (torch, ray, transformers) does not install on the CI machine; the test then runs
against tests/contracts/verl_0_9_1, a stand-in written from verl 0.9.1's
verl/protocol.py and verl/experimental/agent_loop/agent_loop.py (PyPI wheel verl-0.9.1):
the same class names, signatures, registry and batching rules. Where verl itself is
importable, the real classes are used instead."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from tests.openai_stub import OpenAIStub, Reply
from tests.pool_helpers import END, dbbench_record, toy_ids, toy_prompt

try:
    import verl  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).parent / "contracts" / "verl_0_9_1"))

from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)
from verl.protocol import DataProto  # noqa: E402

ANSWER = 'Action: Answer\nFinal Answer: ["1.0"]'


@register("scripted_base")
class ScriptedBase(AgentLoopBase):
    """The user's own agent loop: group "A" fails every row, group "B" has a success."""

    async def run(self, sampling_params, **kwargs):
        won = kwargs["uid"] == "B" and kwargs["index"] == 3
        return AgentLoopOutput(
            prompt_ids=[1, 2, 3],
            response_ids=[7, 8],
            response_mask=[1, 1],
            response_logprobs=[-0.1, -0.2],
            reward_score=1.0 if won else 0.0,
            num_turns=2,
            metrics=AgentLoopMetrics(),
        )


def seeded_reply(text):
    """vLLM-shaped token ids, offset by the request's seed so each rollout's are its own."""

    def offset(req):
        return 10_000 * (int(req["seed"]) % 7 + 1)

    def choice(req):
        ids = [i + offset(req) for i in toy_ids(text) + [END]]
        lps = [{"token": "t", "logprob": -0.01 * (n + 1), "bytes": [], "top_logprobs": []}
               for n in range(len(ids))]  # fmt: skip
        return {"token_ids": ids, "logprobs": {"content": lps}}

    def body(req):
        return {"prompt_token_ids": [i + offset(req) for i in toy_prompt(req["messages"])]}

    return Reply(text, choice_extra=choice, body_extra=body)


def config(model="Qwen/Qwen2.5-7B-Instruct"):
    agent = SimpleNamespace(num_workers=2, default_agent_loop="scripted_base")
    rollout = SimpleNamespace(
        prompt_length=4096,
        response_length=1024,
        temperature=1.0,
        top_p=1.0,
        top_k=-1,
        calculate_log_probs=True,
        agent=agent,
    )
    ref = SimpleNamespace(rollout=rollout, model=SimpleNamespace(path=model))
    return SimpleNamespace(actor_rollout_ref=ref)


def batch(record):
    return DataProto(
        non_tensor_batch={
            "uid": np.array(["A", "A", "B", "B"], dtype=object),
            "index": np.array([0, 1, 2, 3], dtype=object),
            "extra_info": np.array([{"harnessctl_task": record}] * 4, dtype=object),
        },
        meta_info={"global_steps": 5},
    )


def run(out, stub, monkeypatch, record):
    from harnessctl.integrations.verl import RescueAgentLoopManager

    monkeypatch.setenv("HARNESSCTL_POOL", str(out))
    monkeypatch.setenv("HARNESSCTL_RESCUE_ENDPOINT", stub.url)
    manager = RescueAgentLoopManager(config(), llm_client=None)
    return manager, asyncio.run(manager.generate_sequences(batch(record)))


def test_verl_rescue_replaces_every_tensor_of_a_row_from_its_own_sibling_rollout(
    small_pool, monkeypatch
):
    ws, out, _ = small_pool
    record = dbbench_record(ws)
    with OpenAIStub(default=seeded_reply(ANSWER)) as stub:
        manager, result = run(out, stub, monkeypatch, record)
        requests = [r.body for r in stub.chat_requests]
    assert manager.last_rescue["tried"] == ["A"] and manager.last_rescue["replaced"] == ["A"]
    assert {r["model"] for r in requests} == {"Qwen/Qwen2.5-7B-Instruct"}
    assert len(result) == 4 and list(result.batch["rm_scores"].sum(-1)) == [1.0, 1.0, 0.0, 1.0]
    for row in (0, 1):
        meta = manager.last_rescue["rows"][row]
        (first,) = [r for r in requests if r["seed"] == meta["seed"]]  # that rollout's one call
        offset = 10_000 * (meta["seed"] % 7 + 1)
        prompt = [i + offset for i in toy_prompt(first["messages"])]
        reply = [i + offset for i in toy_ids(ANSWER) + [END]]
        padded = result.batch["prompts"][row]
        assert list(padded[-len(prompt) :]) == prompt and not padded[: -len(prompt)].any()
        assert list(result.batch["responses"][row][: len(reply)]) == reply
        assert not result.batch["responses"][row][len(reply) :].any()
        assert list(result.batch["response_mask"][row]) == [1] * len(reply) + [0] * (
            1024 - len(reply)
        )
        logprobs = result.batch["rollout_log_probs"][row][: len(reply)]
        assert np.allclose(logprobs, [-0.01 * (n + 1) for n in range(len(reply))])
        assert meta["outcome"] == "success" and meta["harness"] != "dbbench-base"
    for row in (2, 3):  # a group with a success is never touched
        assert list(result.batch["responses"][row][:2]) == [7, 8]
    assert list(result.non_tensor_batch["__num_turns__"]) == [2, 2, 2, 2]


def test_verl_rescue_keeps_a_group_whose_replacement_also_failed(small_pool, monkeypatch):
    ws, out, _ = small_pool
    wrong = 'Action: Answer\nFinal Answer: ["nope"]'
    with OpenAIStub(default=seeded_reply(wrong)) as stub:
        manager, result = run(out, stub, monkeypatch, dbbench_record(ws))
        assert stub.chat_requests  # the siblings were tried
    assert manager.last_rescue["tried"] == ["A"] and manager.last_rescue["replaced"] == []
    assert [list(r[:2]) for r in result.batch["responses"]] == [[7, 8]] * 4
