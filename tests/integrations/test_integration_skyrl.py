"""SkyRL contract test for ``harnessctl.integrations.skyrl`` (a real pool, a vLLM-shaped stub).

SkyRL does not install here: ``skyrl`` 0.4.0 requires Python >= 3.12 and ``skyrl-train``
0.3.1 Python 3.12 exactly (``pip install skyrl==0.4.0``: "Ignored the following versions that
require a different python version: 0.4.0 Requires-Python <3.15,>=3.12"), and this machine has
Python 3.11 only; its wheel forced onto 3.11 fails on import of
``skyrl.train.utils.trainer_utils`` ("pydantic.errors.PydanticUserError: Please use
``typing_extensions.TypedDict`` instead of ``typing.TypedDict`` on Python < 3.12"). So its
types and checks are stood in for, following NovaSky-AI/SkyRL at a9564572 (``skyrl`` 0.4.0):

- ``skyrl/train/generators/base.py``: ``TrajectoryID`` (a plain dataclass, so unhashable),
  ``BatchMetadata``, ``GeneratorInput`` and ``GeneratorOutput`` (TypedDicts: dicts here);
- ``skyrl/train/generators/utils.py``: ``prepare_generator_input`` (each prompt repeated n
  times, contiguously, ``TrajectoryID(instance_id=uid, repetition_id=j)``);
- ``skyrl/train/utils/trainer_utils.py``: ``validate_generator_output`` (ported below: the
  rules the trainer applies to every generator output);
- ``skyrl/train/trainer.py``: ``generate`` is awaited, then the output validated;
- ``skyrl/train/config/config.py``: ``GeneratorConfig``'s ``max_input_length``,
  ``zero_reward_on_non_stop``, ``apply_overlong_filtering``, which
  ``skyrl/train/generators/skyrl_gym_generator.py`` applies to its rows.

The legacy ``skyrl-train`` 0.3.1 (``skyrl_train/generators/base.py``) has the same types with
fewer output fields.
"""

import asyncio
import copy
from dataclasses import dataclass

import pytest

from harnessctl.integrations.skyrl import RescuingGenerator
from harnessctl.pool import Pool
from tests.helpers.openai_stub import OpenAIStub
from tests.helpers.pools import (
    dbbench_record,
    dbbench_turns,
    toy_prompt,
    vllm_reply,
)

MODEL = "Qwen/Qwen2.5-7B-Instruct"  # served names have slashes
ROW_FIELDS = (
    "prompt_token_ids", "response_ids", "rewards", "loss_masks", "stop_reasons",
    "rollout_logprobs", "trajectory_generation_times", "env_metrics",
)  # fmt: skip


@dataclass
class TrajectoryID:
    instance_id: str
    repetition_id: int


@dataclass
class GeneratorConfig:
    """The three fields of skyrl's ``GeneratorConfig`` the rescue reads (their defaults, but
    ``max_input_length``, which SkyRL fills from ``trainer.max_prompt_length``)."""

    max_input_length: int = 8192
    zero_reward_on_non_stop: bool = False
    apply_overlong_filtering: bool = False


@dataclass
class BatchMetadata:
    global_step: int
    training_phase: str


def prepare_generator_input(records, n, *, phase="train", step=0):
    """The batch SkyRL's trainer builds: each (uid, record) repeated ``n`` times."""
    rows = [(uid, rec, j) for uid, rec in records for j in range(n)]
    return {
        "prompts": [[{"role": "user", "content": rec["description"]}] for _, rec, _ in rows],
        "env_classes": ["dbbench"] * len(rows),
        "env_extras": [{"harnessctl_task": rec} for _, rec, _ in rows],
        "sampling_params": {"temperature": 1.0, "max_tokens": 256, "logprobs": 0},
        "trajectory_ids": [TrajectoryID(uid, j) for uid, _, j in rows],
        "batch_metadata": BatchMetadata(step, phase),
    }


def validate_generator_output(num_prompts, out):
    """Port of skyrl/train/utils/trainer_utils.py::validate_generator_output (not step-wise)."""
    n = len(out["response_ids"])
    assert n > 0 and n == num_prompts == len(out["prompt_token_ids"])
    for key in ("response_ids", "loss_masks", "rewards", "rollout_logprobs", "stop_reasons",
                "trajectory_ids", "rollout_expert_indices", "is_last_step"):  # fmt: skip
        if isinstance(out.get(key), list):
            assert len(out[key]) == n, key
    for i, (ids, mask, reward) in enumerate(
        zip(out["response_ids"], out["loss_masks"], out["rewards"], strict=False)
    ):
        assert len(ids) == len(mask), i
        if isinstance(reward, list):
            assert len(reward) == len(ids), i
        if out.get("rollout_logprobs"):
            assert len(out["rollout_logprobs"][i]) == len(ids), i
    kinds = {isinstance(r, list) for r in out["rewards"]}
    assert len(kinds) == 1, "rewards must be all List[float] or all float"


class Engines:
    """Stands in for SkyRL's inference engine client (only what the rescue uses)."""

    def __init__(self, url):
        self.url = url

    def get_endpoint_url(self):
        return self.url.removesuffix("/v1")


class BaseGenerator:
    """Stands in for SkyRLGymGenerator: the base harness's rows, with the rewards given per
    instance, as SkyRL's default chat path returns them (per token unless ``scalar``)."""

    def __init__(self, engines, rewards, *, scalar=False, logprobs=True, cfg=None):
        self.inference_engine_client = engines
        self.generator_cfg = cfg or GeneratorConfig()
        self.rewards, self.scalar, self.logprobs = rewards, scalar, logprobs
        self.seen = []

    async def generate(self, batch):
        self.seen.append(batch)
        rows = range(len(batch["prompts"]))
        tids = batch["trajectory_ids"]
        scores = [self.rewards[t.instance_id][t.repetition_id] for t in tids]
        return {
            "prompt_token_ids": [[7, 8, 9] for _ in rows],
            "response_ids": [[11, 12, 13, 14] for _ in rows],
            "rewards": scores if self.scalar else [[0.0, 0.0, 0.0, s] for s in scores],
            "loss_masks": [[1, 1, 0, 1] for _ in rows],
            "stop_reasons": ["stop" for _ in rows],
            "rollout_metrics": {"generate/avg_num_tokens": 4.0},
            "rollout_logprobs": [[-0.5, -0.5, 0.0, -0.5] for _ in rows] if self.logprobs else None,
            "trajectory_ids": None,
            "trajectory_generation_times": [0.5 for _ in rows],
            "trajectory_time_splits": {"llm": [0.3 for _ in rows], "env": [0.1 for _ in rows]},
            "rollout_expert_indices": None,
            "is_last_step": None,
            "env_metrics": [{"queries": 1} for _ in rows],
        }


@pytest.fixture(scope="module")
def pool_dir(small_pool):
    ws, out, _ = small_pool
    return ws, out


def seeded(req):
    return 10_000 * req.get("seed", 0)  # each rollout's ids say which seed asked for them


def run(generator, batch):
    return asyncio.run(generator.generate(batch))


def test_trajectory_id_is_unhashable_as_upstream():
    with pytest.raises(TypeError):
        hash(TrajectoryID("x", 0))


def test_a_rescued_group_is_rebuilt_from_its_sibling_rollouts_row_for_row(pool_dir):
    ws, out = pool_dir
    solvable, unsolvable = dbbench_record(ws, 4), dbbench_record(ws, 5)
    batch = prepare_generator_input(
        [("solvable", solvable), ("unsolvable", unsolvable), ("mixed", solvable)], 2
    )
    rewards = {"solvable": [0.0, 0.0], "unsolvable": [0.0, -1.0], "mixed": [0.0, 1.0]}
    with OpenAIStub(vllm_reply(dbbench_turns, offset=seeded)) as stub, Pool.load(out) as pool:
        inner = BaseGenerator(Engines(stub.url), rewards)
        generator = RescuingGenerator(inner, pool, model=MODEL, k=2, max_concurrency=4)
        before = copy.deepcopy(asyncio.run(inner.generate(batch)))
        output = run(generator, batch)
        bodies = [r.body for r in stub.chat_requests]
    validate_generator_output(len(batch["prompts"]), output)
    rescue = generator.last_rescue
    assert rescue.tried_uids == ["solvable", "unsolvable"] and rescue.rescued_uids == ["solvable"]
    # the rescue asked the trainer's endpoint, as served, with token capture and its sampling
    assert {b["model"] for b in bodies} == {MODEL}
    assert all(b["logprobs"] and b["return_token_ids"] for b in bodies)
    assert {(b["temperature"], b["max_tokens"]) for b in bodies} == {(1.0, 256)}
    fresh = rescue.results["solvable"].group
    assert [o.seed for o in fresh] == [0, 1] and all(o.success for o in fresh)
    for i, rollout in enumerate(fresh):  # rows 0 and 1: every field from one rollout
        seq = rollout.tokens()
        assert seq.append_only and 0 in seq.response_mask  # a multi-turn sequence
        assert (
            output["prompt_token_ids"][i]
            == seq.prompt_ids
            == [t + 10_000 * rollout.seed for t in toy_prompt(rollout.calls[0].messages)]
        )
        assert output["response_ids"][i] == seq.response_ids
        assert output["loss_masks"][i] == seq.response_mask
        assert output["rollout_logprobs"][i] == seq.logprobs
        assert output["rewards"][i] == [0.0] * (len(seq.response_ids) - 1) + [rollout.reward]
        assert rollout.reward == 1.0 and output["stop_reasons"][i] == rollout.finish_reason
        assert output["env_metrics"][i] == {}
        llm = sum(c.latency_s for c in rollout.calls)
        assert output["trajectory_time_splits"]["llm"][i] == llm
        assert output["trajectory_generation_times"][i] >= llm
    assert output["response_ids"][0] != output["response_ids"][1]  # two rollouts, not one
    for i in range(2, 6):  # a failed rescue and a group with a success: untouched
        for key in ROW_FIELDS:
            assert output[key][i] == before[key][i], (key, i)
    tried = rescue.results["unsolvable"]
    assert not tried.replaced and len(tried.attempted) == 2
    metrics = output["rollout_metrics"]
    assert metrics["generate/avg_num_tokens"] == 4.0
    assert {k: v for k, v in metrics.items() if k.startswith("harnessctl/") and v != 0} == {
        "harnessctl/rescue_groups_all_fail": 2,
        "harnessctl/rescue_groups_rescued": 1,
        "harnessctl/rescue_rows_replaced": 2,
        "harnessctl/rescue_extra_rollouts": 4,
        "harnessctl/rescue_seconds": metrics["harnessctl/rescue_seconds"],
    }


def test_scalar_rewards_without_logprobs_and_the_batches_left_alone(pool_dir):
    ws, out = pool_dir
    records = [("solvable", dbbench_record(ws, 4))]
    rewards = {"solvable": [0.0, 0.0]}
    with OpenAIStub(vllm_reply(dbbench_turns)) as stub, Pool.load(out) as pool:
        inner = BaseGenerator(Engines(stub.url), rewards, scalar=True, logprobs=False)
        generator = RescuingGenerator(inner, pool, model=MODEL, endpoint=stub.url, seed=5)
        output = run(generator, prepare_generator_input(records, 2, step=3))
        assert {r.body["seed"] for r in stub.chat_requests} == {3_000_005, 3_000_006}
        validate_generator_output(2, output)
        fresh = generator.last_rescue.results["solvable"].group
        assert output["rewards"] == [1.0, 1.0] and output["rollout_logprobs"] is None
        assert output["response_ids"] == [o.tokens().response_ids for o in fresh]
        # eval batches, step-wise batches and fields a rollout cannot fill: no rescue
        stub.requests.clear()
        evaluated = run(generator, prepare_generator_input(records, 2, phase="eval"))
        assert evaluated["rewards"] == [0.0, 0.0] and not stub.requests
        assert not any(k.startswith("harnessctl/") for k in evaluated["rollout_metrics"])
        moe = prepare_generator_input(records, 2)
        inner.generate = _with(inner.generate, rollout_expert_indices=[[[0]], [[1]]])
        skipped = run(generator, moe)
        assert skipped["rollout_metrics"]["harnessctl/rescue_skipped_fields"] == 1
        assert skipped["rewards"] == [0.0, 0.0] and not stub.requests


def test_a_rollout_that_is_not_append_only_keeps_its_group(pool_dir):
    ws, out = pool_dir
    records = [("solvable", dbbench_record(ws, 4))]

    def shifted(req):  # the second call's prompt does not extend the first call's tokens
        return 7 if any(m["role"] == "assistant" for m in req["messages"]) else 0

    with OpenAIStub(vllm_reply(dbbench_turns, offset=shifted)) as stub, Pool.load(out) as pool:
        inner = BaseGenerator(Engines(stub.url), {"solvable": [0.0, 0.0]})
        generator = RescuingGenerator(inner, pool, model=MODEL)
        output = run(generator, prepare_generator_input(records, 2))
    result = generator.last_rescue.results["solvable"]
    assert result.replaced and not any(o.tokens().append_only for o in result.group)
    assert output["response_ids"] == [[11, 12, 13, 14]] * 2  # the base rows, kept
    metrics = output["rollout_metrics"]
    assert metrics["harnessctl/rescue_not_append_only"] == 1
    assert metrics["harnessctl/rescue_groups_rescued"] == 0
    validate_generator_output(2, output)


def _with(generate, **fields):
    async def patched(batch, **kw):
        return {**(await generate(batch, **kw)), **fields}

    return patched


def test_a_rollout_whose_call_exceeds_max_input_length_keeps_its_group(pool_dir):
    """SkyRL's loop stops before a turn whose input is longer than max_input_length: a
    rescue rollout that made such a call is not a row SkyRL could have produced."""
    ws, out = pool_dir
    records = [("solvable", dbbench_record(ws, 4))]
    with OpenAIStub(vllm_reply(dbbench_turns)) as stub, Pool.load(out) as pool:
        probe = BaseGenerator(Engines(stub.url), {"solvable": [0.0, 0.0]})
        generator = RescuingGenerator(probe, pool, model=MODEL)
        run(generator, prepare_generator_input(records, 2))
        rescue = generator.last_rescue.results["solvable"]
        assert rescue.replaced  # without a limit, replaced
        calls = [len(s.prompt_ids) for o in rescue.group for s in o.tokens().samples]
        first = min(len(o.tokens().prompt_ids) for o in rescue.group)
        assert max(calls) > first  # a later call's prompt is longer than the first
        cfg = GeneratorConfig(max_input_length=max(calls) - 1)
        inner = BaseGenerator(Engines(stub.url), {"solvable": [0.0, 0.0]}, cfg=cfg)
        output = run(
            RescuingGenerator(inner, pool, model=MODEL), prepare_generator_input(records, 2)
        )
    assert output["response_ids"] == [[11, 12, 13, 14]] * 2  # the base rows, kept
    metrics = output["rollout_metrics"]
    assert metrics["harnessctl/rescue_over_max_input_length"] == 1
    assert metrics["harnessctl/rescue_groups_rescued"] == 0
    validate_generator_output(2, output)


def truncated_when_odd(req):
    """vLLM's finish_reason "length" on the answering call of rollouts with an odd seed."""
    answered = any(m.get("role") == "assistant" for m in req["messages"])
    return {"finish_reason": "length"} if answered and req.get("seed", 0) % 2 else {}


def test_zero_reward_on_non_stop_and_overlong_filtering_apply_to_rescued_rows(pool_dir):
    ws, out = pool_dir
    records = [("solvable", dbbench_record(ws, 4))]
    reply = vllm_reply(dbbench_turns, offset=seeded)
    base_choice = reply.choice_extra
    reply.choice_extra = lambda req: {**base_choice(req), **truncated_when_odd(req)}
    cfg = GeneratorConfig(zero_reward_on_non_stop=True, apply_overlong_filtering=True)
    with OpenAIStub(reply) as stub, Pool.load(out) as pool:
        inner = BaseGenerator(Engines(stub.url), {"solvable": [0.0, 0.0]}, cfg=cfg)
        generator = RescuingGenerator(inner, pool, model=MODEL)
        output = run(generator, prepare_generator_input(records, 2))
        plain = BaseGenerator(Engines(stub.url), {"solvable": [0.0, 0.0]})
        unruled = run(
            RescuingGenerator(plain, pool, model=MODEL), prepare_generator_input(records, 2)
        )
    validate_generator_output(2, output)
    fresh = generator.last_rescue.results["solvable"].group
    assert [o.seed for o in fresh] == [0, 1] and all(o.reward == 1.0 for o in fresh)
    assert [o.finish_reason for o in fresh] == ["stop", "length"]
    seq0, seq1 = (o.tokens() for o in fresh)
    # row 0 stopped: its rollout's reward and mask; row 1 was cut: no reward, no loss
    assert output["rewards"][0] == [0.0] * (len(seq0.response_ids) - 1) + [1.0]
    assert output["loss_masks"][0] == seq0.response_mask
    assert output["rewards"][1] == [0.0] * len(seq1.response_ids)
    assert output["loss_masks"][1] == [0] * len(seq1.response_ids)
    assert output["response_ids"][1] == seq1.response_ids  # still that rollout's tokens
    assert output["rollout_logprobs"][1] == seq1.logprobs
    assert output["stop_reasons"] == ["stop", "length"]
    # the same rollouts without the rules: row 1 keeps its reward and mask
    assert unruled["rewards"][1][-1] == 1.0 and unruled["loss_masks"][1] == seq1.response_mask
