"""SkyRL contract test for ``harnessctl.integrations.skyrl`` (a real pool, a vLLM-shaped stub).

Each test runs twice: against SkyRL's own code (``skyrl`` 0.4.0) and against stand-ins of its
types. ``skyrl`` 0.4.0 requires Python >= 3.12 and this project's environment is 3.11, so
scripts/test.sh installs it in an environment of its own (``.venv-skyrl``, Python 3.12) and
runs this file there with ``HARNESSCTL_TEST_SKYRL=1``, where the SkyRL half must run (it
fails, not skips, when SkyRL does not import); elsewhere that half is skipped. The SkyRL half
uses:

- ``skyrl/train/generators/base.py``: ``TrajectoryID`` (a plain dataclass, so unhashable),
  ``BatchMetadata``, ``GeneratorOutput`` (its keys are the stand-in generator's);
- ``skyrl/train/generators/utils.py``: ``prepare_generator_input`` (the trainer's batch);
- ``skyrl/train/config/config.py``: ``GeneratorConfig`` (``max_input_length``,
  ``zero_reward_on_non_stop``, ``apply_overlong_filtering``, which
  ``skyrl_gym_generator.py`` applies to its rows);
- ``skyrl/train/utils/trainer_utils.py``: ``validate_generator_output``, which the trainer
  applies to every generator output (``trainer.py``), on every output here;
- ``skyrl/backends/skyrl_train/utils/ppo_utils.py``: ``compute_grpo_outcome_advantage``,
  GRPO's advantage of the rescued rows, against the reported metrics.

The contract half's stand-ins follow those files (types only: no check of SkyRL's is copied
here, so the contract half asserts the rows themselves). Both halves stand in for
``SkyRLGymGenerator`` (the inner generator: it needs a tokenizer, an environment and
inference engines) with rows of the shape it returns.
"""

import asyncio
import copy
import os
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from harnessctl.integrations.skyrl import RescuingGenerator
from harnessctl.pool import Pool, group_advantages
from tests.helpers.openai_stub import OpenAIStub
from tests.helpers.pools import (
    answered,
    dbbench_record,
    dbbench_turns,
    toy_prompt,
    vllm_reply,
)

#: read at import: the autouse isolation fixture clears HARNESSCTL_* variables
SKYRL_HALF = bool(os.environ.get("HARNESSCTL_TEST_SKYRL"))
MODEL = "Qwen/Qwen2.5-7B-Instruct"  # served names have slashes
ROW_FIELDS = (
    "prompt_token_ids", "response_ids", "rewards", "loss_masks", "stop_reasons",
    "rollout_logprobs", "trajectory_generation_times", "env_metrics",
)  # fmt: skip
SAMPLING = {"temperature": 1.0, "max_tokens": 256, "logprobs": 0}


@dataclass
class TrajectoryID:
    instance_id: str
    repetition_id: int


@dataclass
class BatchMetadata:
    global_step: int
    training_phase: str


@dataclass
class GeneratorConfig:
    """The three fields of ``GeneratorConfig`` the rescue reads (their defaults, but
    ``max_input_length``, which SkyRL fills from ``trainer.max_prompt_length``)."""

    max_input_length: int | None = 8192
    zero_reward_on_non_stop: bool = False
    apply_overlong_filtering: bool = False


def prepare_generator_input(prompts, n, sampling_params, env_class, phase, step):
    """The trainer's batch: each prompt repeated ``n`` times, contiguously."""
    rows = [(p, j) for p in prompts for j in range(n)]
    batch = {
        "prompts": [p["prompt"] for p, _ in rows],
        "env_classes": [p["env_class"] or env_class for p, _ in rows],
        "env_extras": [copy.deepcopy(p["env_extras"]) for p, _ in rows],
        "sampling_params": sampling_params,
        "trajectory_ids": [TrajectoryID(p["uid"], j) for p, j in rows],
        "batch_metadata": BatchMetadata(step, phase),
    }
    return batch, [p["uid"] for p, _ in rows]


def real_skyrl():
    if not SKYRL_HALF:
        pytest.skip("SkyRL's half runs in SkyRL's own environment (HARNESSCTL_TEST_SKYRL=1)")
    try:
        from skyrl.backends.skyrl_train.utils.ppo_utils import compute_grpo_outcome_advantage
        from skyrl.train.config import GeneratorConfig as RealConfig
        from skyrl.train.generators import base
        from skyrl.train.generators.utils import prepare_generator_input as real_prepare
        from skyrl.train.utils.trainer_utils import validate_generator_output
    except ImportError as exc:
        pytest.fail(f"HARNESSCTL_TEST_SKYRL is set but skyrl does not import: {exc}")

    def config(max_input_length=8192, **rules):
        return RealConfig(max_input_length=max_input_length, **rules)

    return SimpleNamespace(
        real=True,
        TrajectoryID=base.TrajectoryID,
        GeneratorOutput=base.GeneratorOutput,
        GeneratorConfig=config,
        prepare=real_prepare,
        validate=validate_generator_output,
        grpo=compute_grpo_outcome_advantage,
    )


@pytest.fixture(params=["contract", "skyrl"])
def sky(request):
    if request.param == "skyrl":
        return real_skyrl()
    return SimpleNamespace(
        real=False,
        TrajectoryID=TrajectoryID,
        GeneratorOutput=None,
        GeneratorConfig=GeneratorConfig,
        prepare=prepare_generator_input,
        validate=None,
        grpo=None,
    )


def batch_of(sky, records, n, *, phase="train", step=0):
    """The trainer's batch for ``(uid, record)`` pairs, each row's task in its env_extras."""
    prompts = [
        {
            "prompt": [{"role": "user", "content": rec["description"]}],
            "env_class": "dbbench",
            "env_extras": {"harnessctl_task": rec},
            "uid": uid,
        }
        for uid, rec in records
    ]
    batch, _ = sky.prepare(prompts, n, dict(SAMPLING), "dbbench", phase, step)
    return batch


def validated(sky, batch, output):
    """``output`` after SkyRL's own validation (the SkyRL half), as its trainer applies it."""
    if sky.validate is not None:
        sky.validate(len(batch["prompts"]), output, step_wise=False)
    return output


def skyrl_advantages(sky, batch, output):
    """SkyRL's GRPO advantage of each row (the SkyRL half), from the rows' rewards."""
    import numpy as np
    import torch

    rewards = [r if isinstance(r, list) else [r] for r in output["rewards"]]
    width = max(len(r) for r in rewards)
    tokens = torch.tensor([r + [0.0] * (width - len(r)) for r in rewards])
    index = np.array([tid.instance_id for tid in batch["trajectory_ids"]], dtype=object)
    adv, _ = sky.grpo(tokens, torch.ones_like(tokens), index)
    return adv[:, 0].tolist()


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
        self.generator_cfg = cfg if cfg is not None else GeneratorConfig()
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
            "rollout_sample_support": None,
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


def harnessctl_metrics(output):
    metrics = output["rollout_metrics"]
    return {k: v for k, v in metrics.items() if k.startswith("harnessctl/") and v != 0}


def test_skyrls_types_are_what_the_rescue_and_the_stand_ins_assume(sky):
    with pytest.raises(TypeError):  # the group key is instance_id: TrajectoryID is unhashable
        hash(sky.TrajectoryID("x", 0))
    cfg = sky.GeneratorConfig(max_input_length=100, zero_reward_on_non_stop=True)
    rules = RescuingGenerator(BaseGenerator(None, {}, cfg=cfg), None, model=MODEL).rules
    assert (rules.max_input_length, rules.zero_reward_on_non_stop) == (100, True)
    assert not rules.apply_overlong_filtering
    if sky.real:  # the stand-in generator returns every key of a text-only GeneratorOutput
        output = asyncio.run(
            BaseGenerator(None, {"u": [0.0]}).generate(
                batch_of(sky, [("u", {"description": "q"})], 1)
            )
        )
        vision = {"pixel_values", "image_grid_thw"}
        assert set(output) == set(sky.GeneratorOutput.__annotations__) - vision
    with pytest.raises(ValueError, match="keep-failures, replace"):
        RescuingGenerator(BaseGenerator(None, {}), None, model=MODEL, mix="all")


def test_keep_failures_rescues_the_first_half_of_a_group_and_keeps_its_base_failures(pool_dir, sky):
    """The default mix: a rescued group of two gets one sibling rollout (row 0) and keeps one
    base failure (row 1), so its rewards vary and GRPO's advantage on it is not zero."""
    ws, out = pool_dir
    solvable, unsolvable = dbbench_record(ws, 4), dbbench_record(ws, 5)
    batch = batch_of(
        sky, [("solvable", solvable), ("unsolvable", unsolvable), ("mixed", solvable)], 2
    )
    rewards = {"solvable": [0.0, 0.0], "unsolvable": [0.0, -1.0], "mixed": [0.0, 1.0]}
    with OpenAIStub(vllm_reply(dbbench_turns, offset=seeded)) as stub, Pool.load(out) as pool:
        inner = BaseGenerator(Engines(stub.url), rewards, cfg=sky.GeneratorConfig())
        generator = RescuingGenerator(inner, pool, model=MODEL, k=2, max_concurrency=4)
        before = copy.deepcopy(asyncio.run(inner.generate(batch)))
        output = validated(sky, batch, run(generator, batch))
    rescue = generator.last_rescue
    assert rescue.tried_uids == ["solvable", "unsolvable"] and rescue.rescued_uids == ["solvable"]
    result = rescue.results["solvable"]
    assert result.rows == [0] and [o.seed for o in result.attempted] == [0]
    (fresh,) = result.attempted
    seq = fresh.tokens()
    assert fresh.success and output["response_ids"][0] == seq.response_ids
    assert output["rewards"][0] == [0.0] * (len(seq.response_ids) - 1) + [1.0]
    assert output["loss_masks"][0] == seq.response_mask
    assert output["rollout_logprobs"][0] == seq.logprobs
    for i in range(1, 6):  # the kept base failure, a failed rescue, a group with a success
        for key in ROW_FIELDS:
            assert output[key][i] == before[key][i], (key, i)
    advantage = group_advantages([1.0, 0.0])[0]
    assert harnessctl_metrics(output) == {
        "harnessctl/rescue_groups": 3,
        "harnessctl/rescue_all_fail": 2,
        "harnessctl/rescue_rescued": 1,
        "harnessctl/rescue_rescued_rows": 1,
        "harnessctl/rescue_rescued_mean_abs_advantage": pytest.approx(advantage),
        "harnessctl/rescue_extra_rollouts": 2,  # one per all-fail group of two
        "harnessctl/rescue_seconds": output["rollout_metrics"]["harnessctl/rescue_seconds"],
    }
    assert generator.last_metrics.rescued_zero_variance == 0
    if sky.real:  # SkyRL's own GRPO: the rescued row and the kept failure both train
        adv = skyrl_advantages(sky, batch, output)
        assert adv[0] == pytest.approx(advantage, rel=1e-5) and adv[1] == pytest.approx(-advantage)


def test_replace_rebuilds_a_rescued_group_from_its_sibling_rollouts_row_for_row(pool_dir, sky):
    ws, out = pool_dir
    solvable, unsolvable = dbbench_record(ws, 4), dbbench_record(ws, 5)
    batch = batch_of(
        sky, [("solvable", solvable), ("unsolvable", unsolvable), ("mixed", solvable)], 2
    )
    rewards = {"solvable": [0.0, 0.0], "unsolvable": [0.0, -1.0], "mixed": [0.0, 1.0]}
    with OpenAIStub(vllm_reply(dbbench_turns, offset=seeded)) as stub, Pool.load(out) as pool:
        inner = BaseGenerator(Engines(stub.url), rewards, cfg=sky.GeneratorConfig())
        generator = RescuingGenerator(inner, pool, model=MODEL, k=2, mix="replace")
        before = copy.deepcopy(asyncio.run(inner.generate(batch)))
        output = validated(sky, batch, run(generator, batch))
        bodies = [r.body for r in stub.chat_requests]
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
    assert output["rollout_metrics"]["generate/avg_num_tokens"] == 4.0
    # both sibling rollouts succeeded: the rescued group has no reward variance
    assert harnessctl_metrics(output) == {
        "harnessctl/rescue_groups": 3,
        "harnessctl/rescue_all_fail": 2,
        "harnessctl/rescue_rescued": 1,
        "harnessctl/rescue_rescued_zero_variance": 1,
        "harnessctl/rescue_rescued_rows": 2,
        "harnessctl/rescue_extra_rollouts": 4,
        "harnessctl/rescue_seconds": output["rollout_metrics"]["harnessctl/rescue_seconds"],
    }
    if sky.real:  # SkyRL's own GRPO gives the replaced group's rows advantage 0
        assert skyrl_advantages(sky, batch, output)[:2] == [0.0, 0.0]


def test_scalar_rewards_without_logprobs_and_the_batches_left_alone(pool_dir, sky):
    ws, out = pool_dir
    records = [("solvable", dbbench_record(ws, 4))]
    rewards = {"solvable": [0.0, 0.0]}
    with OpenAIStub(vllm_reply(dbbench_turns)) as stub, Pool.load(out) as pool:
        inner = BaseGenerator(Engines(stub.url), rewards, scalar=True, logprobs=False)
        generator = RescuingGenerator(inner, pool, model=MODEL, endpoint=stub.url, seed=5)
        batch = batch_of(sky, records, 2, step=3)
        output = validated(sky, batch, run(generator, batch))
        assert {r.body["seed"] for r in stub.chat_requests} == {3_000_005}
        (fresh,) = generator.last_rescue.results["solvable"].attempted
        assert output["rewards"] == [1.0, 0.0] and output["rollout_logprobs"] is None
        assert output["response_ids"] == [fresh.tokens().response_ids, [11, 12, 13, 14]]
        # eval batches, step-wise batches and fields a rollout cannot fill: no rescue
        stub.requests.clear()
        evaluated = run(generator, batch_of(sky, records, 2, phase="eval"))
        assert evaluated["rewards"] == [0.0, 0.0] and not stub.requests
        assert not any(k.startswith("harnessctl/") for k in evaluated["rollout_metrics"])
        inner.generate = _with(inner.generate, rollout_expert_indices=[[[0]], [[1]]])
        skipped = run(generator, batch_of(sky, records, 2))
        assert skipped["rollout_metrics"]["harnessctl/rescue_skipped_fields"] == 1
        assert skipped["rewards"] == [0.0, 0.0] and not stub.requests


def test_a_rollout_that_is_not_append_only_keeps_its_group(pool_dir, sky):
    ws, out = pool_dir
    records = [("solvable", dbbench_record(ws, 4))]

    def shifted(req):  # the second call's prompt does not extend the first call's tokens
        return 7 if answered(req) else 0

    with OpenAIStub(vllm_reply(dbbench_turns, offset=shifted)) as stub, Pool.load(out) as pool:
        inner = BaseGenerator(Engines(stub.url), {"solvable": [0.0, 0.0]})
        generator = RescuingGenerator(inner, pool, model=MODEL)
        batch = batch_of(sky, records, 2)
        output = validated(sky, batch, run(generator, batch))
    result = generator.last_rescue.results["solvable"]
    assert result.replaced and not any(o.tokens().append_only for o in result.attempted)
    assert output["response_ids"] == [[11, 12, 13, 14]] * 2  # the base rows, kept
    metrics = output["rollout_metrics"]
    assert metrics["harnessctl/rescue_not_append_only"] == 1
    assert metrics["harnessctl/rescue_rescued"] == 0 and metrics["harnessctl/rescue_all_fail"] == 1


def _with(generate, **fields):
    async def patched(batch, **kw):
        return {**(await generate(batch, **kw)), **fields}

    return patched


def test_a_rollout_whose_call_exceeds_max_input_length_keeps_its_group(pool_dir, sky):
    """SkyRL's loop stops before a turn whose input is longer than max_input_length: a
    rescue rollout that made such a call is not a row SkyRL could have produced."""
    ws, out = pool_dir
    records = [("solvable", dbbench_record(ws, 4))]
    with OpenAIStub(vllm_reply(dbbench_turns)) as stub, Pool.load(out) as pool:
        probe = BaseGenerator(Engines(stub.url), {"solvable": [0.0, 0.0]})
        generator = RescuingGenerator(probe, pool, model=MODEL)
        run(generator, batch_of(sky, records, 2))
        rescue = generator.last_rescue.results["solvable"]
        assert rescue.replaced  # without a limit, replaced
        calls = [len(s.prompt_ids) for o in rescue.attempted for s in o.tokens().samples]
        first = min(len(o.tokens().prompt_ids) for o in rescue.attempted)
        assert max(calls) > first  # a later call's prompt is longer than the first
        cfg = sky.GeneratorConfig(max_input_length=max(calls) - 1)
        inner = BaseGenerator(Engines(stub.url), {"solvable": [0.0, 0.0]}, cfg=cfg)
        batch = batch_of(sky, records, 2)
        output = validated(sky, batch, run(RescuingGenerator(inner, pool, model=MODEL), batch))
    assert output["response_ids"] == [[11, 12, 13, 14]] * 2  # the base rows, kept
    metrics = output["rollout_metrics"]
    assert metrics["harnessctl/rescue_over_max_input_length"] == 1
    assert metrics["harnessctl/rescue_rescued"] == 0


def truncated_when_odd(req):
    """vLLM's finish_reason "length" on the answering call of rollouts with an odd seed."""
    return {"finish_reason": "length"} if answered(req) and req.get("seed", 0) % 2 else {}


def test_zero_reward_on_non_stop_and_overlong_filtering_apply_to_rescued_rows(pool_dir, sky):
    ws, out = pool_dir
    records = [("solvable", dbbench_record(ws, 4))]
    reply = vllm_reply(dbbench_turns, offset=seeded)
    base_choice = reply.choice_extra
    reply.choice_extra = lambda req: {**base_choice(req), **truncated_when_odd(req)}
    cfg = sky.GeneratorConfig(zero_reward_on_non_stop=True, apply_overlong_filtering=True)
    with OpenAIStub(reply) as stub, Pool.load(out) as pool:
        inner = BaseGenerator(Engines(stub.url), {"solvable": [0.0, 0.0]}, cfg=cfg)
        generator = RescuingGenerator(inner, pool, model=MODEL, mix="replace")
        batch = batch_of(sky, records, 2)
        output = validated(sky, batch, run(generator, batch))
        plain = BaseGenerator(Engines(stub.url), {"solvable": [0.0, 0.0]})
        unruled = run(
            RescuingGenerator(plain, pool, model=MODEL, mix="replace"), batch_of(sky, records, 2)
        )
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
    # the metrics read the rewards as the rules left them: the group varies after all
    assert generator.last_metrics.rescued_zero_variance == 0
    # the same rollouts without the rules: row 1 keeps its reward and mask
    assert unruled["rewards"][1][-1] == 1.0 and unruled["loss_masks"][1] == seq1.response_mask


def test_the_example_wraps_skyrls_generator_as_its_config_says(pool_dir, monkeypatch):
    """examples/trainers/skyrl_generator.py against skyrl 0.4.0: its get_generator wraps
    BasePPOExp's generator, names the policy as SkyRL resolves it, and obeys the generator
    config; the batch it returns passes SkyRL's validation."""
    sky = real_skyrl()
    import importlib.util
    from pathlib import Path

    from skyrl.train.config import SkyRLTrainConfig
    from skyrl.train.entrypoints.main_base import BasePPOExp

    path = Path(__file__).parents[2] / "examples" / "trainers" / "skyrl_generator.py"
    spec = importlib.util.spec_from_file_location("skyrl_generator_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    ws, out = pool_dir
    cfg = SkyRLTrainConfig.from_cli_overrides(
        ["trainer.policy.model.path=Qwen/Qwen3-0.6B", "trainer.max_prompt_length=4096"]
    )
    records = [("solvable", dbbench_record(ws, 4))]
    with OpenAIStub(vllm_reply(dbbench_turns)) as stub:
        rewards = {"solvable": [0.0, 0.0]}

        def base_generator(self, cfg, tokenizer, client):  # SkyRLGymGenerator needs a model
            return BaseGenerator(client, rewards, cfg=cfg.generator)

        monkeypatch.setattr(BasePPOExp, "get_generator", base_generator)
        monkeypatch.setattr(example, "POOL", str(out))
        exp = example.RescuePPOExp.__new__(example.RescuePPOExp)  # no Ray, no placement
        generator = exp.get_generator(cfg, None, Engines(stub.url))
        assert isinstance(generator, RescuingGenerator) and isinstance(exp, BasePPOExp)
        assert generator.model == "Qwen/Qwen3-0.6B" and generator.mix == "keep-failures"
        assert generator.rules.max_input_length == 4096  # SkyRL filled it from the trainer's
        batch = batch_of(sky, records, 2)
        output = validated(sky, batch, run(generator, batch))
        generator.pool.close()
    assert {b["model"] for b in (r.body for r in stub.chat_requests)} == {"Qwen/Qwen3-0.6B"}
    assert output["rewards"][0][-1] == 1.0 and output["rewards"][1] == [0.0, 0.0, 0.0, 0.0]
    assert output["rollout_metrics"]["harnessctl/rescue_rescued"] == 1
