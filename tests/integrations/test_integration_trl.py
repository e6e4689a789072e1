"""TRL (1.16) integration: ``harnessctl.integrations.trl`` as GRPOTrainer's ``rollout_func``.

Two halves. The rule's bookkeeping (groups from TRL's repeated prompts, a rollout as one TRL
row with its model-token mask, the all-fail group replaced in part by sibling rollouts under
``keep-failures``, metrics in TRL's log) against a pool whose rollouts are scripted. Then
the real thing, short: SmolLM2-135M-Instruct (the catalogue's GGUF, de-quantised by
transformers) trained one GRPO step per arm, policy-only and with the rescue, on the toy game
under a pool evolved on the sim policy; the numbers must be finite and logged, nothing more
(one CPU step shows no learning).
"""

from __future__ import annotations

import math
import os
import sys
from collections import defaultdict
from types import SimpleNamespace

import pytest

from harnessctl.pool import RolloutOutput
from harnessctl.pool.rows import encode_task
from harnessctl.records import ModelCall
from tests.helpers import ROOT
from tests.helpers.ci import unavailable

try:  # the `trainers` extra (trl, gguf) and examples/toyenv; .ci/run installs both
    import gguf  # noqa: F401
    import toyenv  # noqa: F401
    import trl  # noqa: F401

    from harnessctl.integrations.trl import (
        REWARD,
        HarnessRollouts,
        PolicyServer,
        ReplyIds,
        prompt_groups,
        rollout_reward,
        template_ids,
        trl_row,
    )
except ImportError as exc:
    unavailable("the TRL integration", f"pip install -e '.[trainers]' -e examples/toyenv ({exc})",
                module=True)  # fmt: skip

sys.path.insert(0, str(ROOT / "examples" / "trainers"))
import trl_rescue  # noqa: E402  (the example's wiring, run as a user runs it)

from harnessctl.localmodel import model_dir  # noqa: E402
from tests.helpers.workspaces import isolate  # noqa: E402

MODEL_DIR = model_dir()  # read before the tests isolate HOME: the model is fetched once

TASK = {"category": "fetch", "goal": {"take": "apple"}}


def call(index, prompt, reply_ids, reply="x", logprob=-0.5):
    return ModelCall(
        index=index, model="m", messages=[], reply=reply, prompt_ids=prompt,
        completion_ids=reply_ids, logprobs=[logprob] * len(reply_ids),
    )  # fmt: skip


def output(reward, calls=(), harness="toy-base"):
    outcome = "success" if reward > 0 else "invalid_format"
    return RolloutOutput(harness, "h", "t", 0, outcome, float(reward), [], [], calls=list(calls))


# --- rows ------------------------------------------------------------------------------------


def test_a_multi_turn_rollout_is_one_row_masking_what_the_harness_added():
    calls = [call(0, [1, 2], [3, 4]), call(1, [1, 2, 3, 4, 9, 9], [5], logprob=-1.0)]
    row = trl_row(output(1.0, calls), max_completion_length=None, pad_id=0)
    assert row.prompt_ids == [1, 2]
    assert row.completion_ids == [3, 4, 9, 9, 5]
    assert row.env_mask == [1, 1, 0, 0, 1]
    assert row.logprobs == [-0.5, -0.5, 0.0, 0.0, -1.0]
    assert row.reward == 1.0 and not row.unstitched
    cut = trl_row(output(1.0, calls), max_completion_length=3, pad_id=0)
    assert cut.completion_ids == [3, 4, 9] and cut.env_mask == [1, 1, 0]


def test_a_rewritten_context_keeps_its_last_call_and_says_so():
    calls = [call(0, [1, 2], [3]), call(1, [7, 7], [8, 8])]
    row = trl_row(output(0.0, calls), max_completion_length=None, pad_id=0)
    assert (row.prompt_ids, row.completion_ids, row.env_mask) == ([7, 7], [8, 8], [1, 1])
    assert "rewrote its context" in row.unstitched


def test_a_rollout_without_tokens_trains_nothing():
    row = trl_row(output(0.0, []), max_completion_length=None, pad_id=5)
    assert (row.completion_ids, row.env_mask) == ([5], [0]) and row.unstitched


def test_prompts_come_in_groups_of_num_generations():
    a, b = encode_task(TASK), encode_task({**TASK, "goal": {"take": "pen"}})
    assert prompt_groups([a, a, b, b], 2) == [TASK, {**TASK, "goal": {"take": "pen"}}]
    with pytest.raises(ValueError, match="not one task repeated"):
        prompt_groups([a, b, a, b], 2)
    with pytest.raises(ValueError, match="groups of 3"):
        prompt_groups([a, a], 3)


def test_the_reward_function_reads_the_rollout_rewards():
    assert rollout_reward(["a", "b"], **{REWARD: [1, 0.0]}) == [1.0, 0.0]
    with pytest.raises(ValueError, match="rollout_func"):
        rollout_reward(["a"])


# --- the rescue inside rollout_func, on scripted rollouts ------------------------------------


class Scripted:
    """A pool whose base fails every task but ``"win"``'s and whose siblings succeed."""

    def __init__(self):
        self.base = self.harness("toy-base")
        self.seen = []

    def harness(self, name):
        def rollout(task, policy, seed=0):
            self.seen.append((name, task["goal"]["take"], seed))
            ok = name != "toy-base" or task["goal"]["take"] == "win"
            n = 10 if name == "toy-base" else 20
            return output(1.0 if ok else 0.0, [call(0, [n], [n + 1, n + 2])], harness=name)

        return SimpleNamespace(rollout=rollout)

    def route(self, task, failures, k=2):
        return ["sibling-a", "sibling-b"][:k]


class Tokenizer:
    eos_token_id = pad_token_id = 0

    def get_vocab(self):
        return {}


def fake_trainer():
    model = SimpleNamespace(training=True, generation_config=None)
    return SimpleNamespace(
        model=model, num_generations=4, num_generations_eval=4, processing_class=Tokenizer(),
        state=SimpleNamespace(global_step=3), max_completion_length=64,
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
    )  # fmt: skip


@pytest.mark.parametrize("rescue", [True, False])
def test_an_all_fail_group_gets_sibling_rows_and_a_group_with_a_success_is_kept(rescue):
    pool, trainer = Scripted(), fake_trainer()
    lose, win = (
        encode_task({**TASK, "goal": {"take": "lose"}}),
        encode_task({**TASK, "goal": {"take": "win"}}),
    )
    rollouts = HarnessRollouts(pool, rescue=rescue, max_workers=1)  # type: ignore[arg-type]
    try:
        out = rollouts([lose] * 4 + [win] * 4, trainer)
    finally:
        rollouts.close()
    base = [s for s in pool.seen if s[0] == "toy-base"]
    assert [s[2] for s in base] == [300_009 + 1000 * g + r for g in (0, 1) for r in range(4)]
    metrics = trainer._metrics["train"]
    assert metrics["harnessctl/base_reward"] == [0.5]  # before the rescue, both arms
    assert rollouts.records[0].base_outcomes == {"invalid_format": 4, "success": 4}
    if not rescue:
        assert out[REWARD] == [0.0] * 4 + [1.0] * 4
        assert "harnessctl/rescue_rescued" not in metrics
        return
    # keep-failures: rows 0-1 of the failed group are sibling rollouts, rows 2-3 its base
    assert out[REWARD] == [1.0, 1.0, 0.0, 0.0] + [1.0] * 4
    assert out["prompt_ids"][:4] == [[20], [20], [10], [10]]
    assert out["completion_ids"][0] == [21, 22] and out["env_mask"][0] == [1, 1]
    fresh = [s for s in pool.seen if s[0] != "toy-base"]
    assert [(h, t) for h, t, _ in fresh] == [("sibling-a", "lose"), ("sibling-b", "lose")]
    assert metrics["harnessctl/rescue_all_fail"] == [1.0]
    assert metrics["harnessctl/rescue_rescued"] == [1.0]
    assert metrics["harnessctl/rescue_rescued_rows"] == [2.0]
    assert metrics["harnessctl/rescue_rescued_mean_abs_advantage"][0] > 0
    assert rollouts.records[0].sibling_outcomes == {"success": 2}


def test_several_processes_are_refused_since_they_split_groups():
    trainer = fake_trainer()
    trainer.accelerator = SimpleNamespace(num_processes=2)
    rollouts = HarnessRollouts(Scripted(), rescue=True)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="every group on one process"):
        rollouts([encode_task(TASK)] * 4, trainer)


# --- the real model --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def policy():
    return trl_rescue.load_policy("smollm2", MODEL_DIR)


@pytest.mark.slow  # the slow tier (README, "Tests"): CI runs it
def test_a_served_reply_is_templated_with_the_ids_the_model_generated(policy):
    _, tokenizer = policy
    text = "Action: go to countertop"
    odd = [tokenizer.convert_tokens_to_ids(c) for c in "Action:"]  # a split no BPE makes
    odd += tokenizer(" go to countertop", add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(odd) == text
    replies = ReplyIds()
    replies.put(text, odd)
    messages = [
        {"role": "user", "content": "Take the apple."},
        {"role": "assistant", "content": text},
        {"role": "user", "content": "Nothing happens."},
    ]
    first = template_ids(tokenizer, messages[:1], replies)
    ids = template_ids(tokenizer, messages, replies)
    assert ids[: len(first)] == first
    assert ids[len(first) : len(first) + len(odd)] == odd
    # the reply's text inside an earlier message is not where the reply is
    echo = [{"role": "user", "content": f"Write {text!r}."}, *messages[1:]]
    start = template_ids(tokenizer, echo[:1], replies)
    assert template_ids(tokenizer, echo, replies)[len(start) : len(start) + len(odd)] == odd


@pytest.mark.slow
def test_the_server_samples_by_seed_and_leaves_the_model_training(policy):
    model, tokenizer = policy
    model.train()
    server = PolicyServer(model, tokenizer, max_new_tokens=4)
    body = {"messages": [{"role": "user", "content": "Say hi."}], "seed": 3}
    first, again = server.generate(body), server.generate(body)
    assert first.ids == again.ids and len(first.logprobs) == len(first.ids) <= 4
    assert all(lp <= 0 for lp in first.logprobs) and model.training
    assert first.prompt_ids == template_ids(tokenizer, body["messages"], ReplyIds())
    # the reply is remembered: a conversation holding it is templated with its very ids
    follow = [*body["messages"], {"role": "assistant", "content": first.text}]
    ended = first.finish_reason == "stop"
    reply = first.ids[:-1] if ended else first.ids
    held = template_ids(tokenizer, follow, server.replies)
    assert held[: len(first.prompt_ids) + len(reply)] == first.prompt_ids + reply


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    """A two-layer Qwen2 with random weights (tests/helpers/tiny_model.py): the server's
    handling of requests needs a model, not a good one."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.helpers.tiny_model import make_model_dir

    path = str(make_model_dir(tmp_path_factory.mktemp("tiny"), weights=True))
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


@pytest.mark.slow
def test_the_server_answers_values_its_model_cannot_take_with_a_400(tiny_policy):
    """A harness-chosen seed past what torch takes used to raise in the handler and drop the
    connection: the gateway's ``infra_error``, retried and left out of the score."""
    import http.client
    import json

    def post(body: str) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())

    hi = [{"role": "user", "content": "Say hi."}]
    with PolicyServer(*tiny_policy, max_new_tokens=2) as server:
        port = int(server.base_url.split(":")[-1].split("/")[0])
        replies = []
        for seed in (-(2**63), 2**63 - 1, 2**63 - 1):  # the largest overflowed manual_seed
            status, reply = post(json.dumps({"messages": hi, "seed": seed}))
            assert status == 200, reply
            replies.append(reply["choices"][0]["token_ids"])
        assert replies[1] == replies[2]  # still sampled by seed
        for body, said in [
            (json.dumps({"messages": hi, "seed": 2**64}), "seed must be between"),
            ('{"messages": [{"role": "user", "content": "x"}], "top_p": NaN}', "top_p must be"),
            ('{"messages": "x"}', "messages must be a non-empty list"),
            ("{not json", "Expecting property name"),
        ]:
            status, reply = post(body)
            assert (status, reply["error"]["type"]) == (400, "invalid_request_error"), reply
            assert said in reply["error"]["message"]
        assert server.calls == 3  # nothing refused reached the model


@pytest.fixture(scope="module")
def pool_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("trl")
    with pytest.MonkeyPatch.context() as mp:  # conftest's isolation, for a module fixture
        isolate(mp, tmp_path_factory.mktemp("home"), root / "ws")
        return trl_rescue.toy_pool(root, evolve=trl_rescue.QUICK_EVOLVE)


@pytest.mark.slow
@pytest.mark.parametrize("rescue", [False, True])
def test_one_grpo_step_with_real_weights_is_finite_and_logged(policy, pool_dir, tmp_path, rescue):
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tokenizer = policy
    # the rescue arm on the toy suite in one forward pass; policy-only on the reach suite (the
    # benchmark's games) a row per forward pass, the step made up by gradient accumulation
    suite, micro = ("toy", None) if rescue else ("reach", 1)
    tasks = trl_rescue.toy_tasks("train" if suite == "reach" else "dev", suite)[:1]
    result = trl_rescue.train(
        pool_dir, model, tokenizer, tasks, rescue=rescue, out=tmp_path, steps=1, groups=1,
        size=2, max_new_tokens=12, max_calls=2, micro=micro,
    )  # fmt: skip
    assert [e["step"] for e in result["log_history"] if "loss" in e] == [1]  # one optimiser step
    (step,) = result["steps"]
    assert len(step["base_rewards"]) == 2 and math.isfinite(step["base_reward"])
    assert all(math.isfinite(r) for r in step["trained_rewards"])
    logged = result["log_history"][0]
    assert math.isfinite(logged["loss"]) and logged["harnessctl/base_reward"] == step["base_reward"]
    if rescue:
        assert logged["harnessctl/rescue_groups"] == 1.0
        assert math.isfinite(logged["harnessctl/rescue_rescued_mean_abs_advantage"])
    else:
        assert not any(key.startswith("harnessctl/rescue_") for key in logged)
