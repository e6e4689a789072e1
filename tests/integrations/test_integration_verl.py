"""verl integration (harnessctl.integrations.verl) run through verl 0.9.1's own code.

verl's real ``AgentLoopManager``, ``AgentLoopWorker`` (padding, reward placement,
``_postprocess`` batching), ``DataProto``, ``LLMServerClient`` and its load balancer
(``GlobalRequestLoadBalancer``) run here, configured by verl's own Hydra config
(``ppo_trainer``) with the overrides examples/trainers/verl_agent_loop.py gives a user. Only
Ray is replaced: the manager's workers and the load balancer are in-process objects whose
methods answer ``.remote(...)`` with an awaitable (Ray's actor handle shape; the manager's
``agent_loop_workers_class`` is verl's hook for that), because a Ray cluster of worker
processes, each importing torch and verl, does not fit this suite's time. The policy's
server is tests/helpers/openai_stub.py answering with vLLM-shaped token ids and logprobs; the model
directory is a tokenizer trained here (tests/helpers/tiny_model.py)."""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import ROOT
from tests.helpers.ci import unavailable
from tests.helpers.openai_stub import OpenAIStub, Reply
from tests.helpers.pools import END, dbbench_record, toy_ids, toy_prompt

try:
    import verl.experimental.agent_loop.agent_loop as agent_loop
    from hydra import compose, initialize_config_dir
    from verl.protocol import DataProto
    from verl.workers.rollout.llm_server import LLMServerClient
    from verl.workers.rollout.router import GlobalRequestLoadBalancer
except ImportError as exc:  # pragma: no cover - CI installs verl (.ci/run)
    unavailable("verl's agent-loop code", f"verl does not import here: {exc}", module=True)

sys.path.insert(0, str(ROOT / "examples" / "trainers"))
from verl_agent_loop import agent_loops_yaml, to_verl_rows, verl_overrides  # noqa: E402

ANSWER = 'Action: Answer\nFinal Answer: ["1.0"]'
PROMPT_LENGTH, RESPONSE_LENGTH = 2048, 256


class InProcessActor:
    """An object behind Ray's actor-handle shape: ``handle.method.remote(...)`` -> awaitable."""

    def __init__(self, obj):
        self._obj = obj

    def __getattr__(self, name):
        method = getattr(self._obj, name)

        class _Remote:
            @staticmethod
            def remote(*args, **kwargs):
                result = method(*args, **kwargs)
                if inspect.isawaitable(result):
                    return result
                future = asyncio.get_running_loop().create_future()
                future.set_result(result)
                return future

        return _Remote


class InProcessActorClass:
    """``ray.remote(cls)``'s shape: ``.options(...).remote(*args)`` builds one in-process."""

    def __init__(self, cls):
        self.cls = cls

    def options(self, **_):
        return self

    def remote(self, *args, **kwargs):
        return InProcessActor(self.cls(*args, **kwargs))


@agent_loop.register("scripted_base")
class ScriptedBase(agent_loop.AgentLoopBase):
    """The user's own agent loop: group "A" fails every row, group "B" has a success."""

    async def run(self, sampling_params, **kwargs):
        won = kwargs["uid"] == "B" and kwargs["index"] == 3
        return agent_loop.AgentLoopOutput(
            prompt_ids=[1, 2, 3],
            response_ids=[7, 8],
            response_mask=[1, 1],
            response_logprobs=[-0.1, -0.2],
            reward_score=1.0 if won else 0.0,
            num_turns=2,
            metrics=agent_loop.AgentLoopMetrics(),
        )


def rescue_manager_class():
    from harnessctl.integrations.verl import RescueAgentLoopManager

    class InProcessRescueManager(RescueAgentLoopManager):
        agent_loop_workers_class = InProcessActorClass(agent_loop.AgentLoopWorker)

    return InProcessRescueManager


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from tests.helpers.tiny_model import make_model_dir

    return make_model_dir(tmp_path_factory.mktemp("verl-model") / "tiny")


def verl_config(model_dir, tmp_path, *extra):
    """verl's ``ppo_trainer`` config with the example's overrides plus this test's."""
    import verl

    loops = agent_loops_yaml(tmp_path / "agent_loops.yaml")
    overrides = verl_overrides(model=str(model_dir), train_files="unused.parquet", loops=loops)
    overrides += [
        f"actor_rollout_ref.rollout.prompt_length={PROMPT_LENGTH}",
        f"actor_rollout_ref.rollout.response_length={RESPONSE_LENGTH}",
        "actor_rollout_ref.rollout.agent.num_workers=2",
        "actor_rollout_ref.rollout.agent.default_agent_loop=scripted_base",
        *extra,
    ]
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def llm_client(config, *addresses):
    balancer = GlobalRequestLoadBalancer(servers={a: None for a in addresses})
    return LLMServerClient(config, load_balancer_handle=InProcessActor(balancer))


def seeded_reply(text, *, ids=lambda req: True, logprobs=True):
    """vLLM-shaped token ids, offset by the request's seed so each rollout's are its own."""

    def offset(req):
        return 10_000 * (int(req["seed"]) % 7 + 1)

    def choice(req):
        if not ids(req):
            return {}
        out = {"token_ids": [i + offset(req) for i in toy_ids(text) + [END]]}
        if logprobs:
            out["logprobs"] = {"content": [
                {"token": "t", "logprob": -0.01 * (n + 1), "bytes": [], "top_logprobs": []}
                for n in range(len(out["token_ids"]))
            ]}  # fmt: skip
        return out

    def body(req):
        if not ids(req):
            return {}
        return {"prompt_token_ids": [i + offset(req) for i in toy_prompt(req["messages"])]}

    return Reply(text, choice_extra=choice, body_extra=body)


def column(values):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def batch(record):
    """The rows verl's trainer hands the manager: ``uid`` per group, the dataset's columns."""
    return DataProto(
        non_tensor_batch={
            "uid": column(["A", "A", "B", "B"]),
            "index": column([0, 1, 2, 3]),
            "raw_prompt": column([[{"role": "user", "content": "q"}]] * 4),
            "extra_info": column([{"harnessctl_task": record}] * 4),
        },
        meta_info={"global_steps": 5},
    )


def build(config, client, monkeypatch, pool, mix=None):
    monkeypatch.setenv("HARNESSCTL_POOL", str(pool))
    if mix is None:
        monkeypatch.delenv("HARNESSCTL_RESCUE_MIX", raising=False)
    else:
        monkeypatch.setenv("HARNESSCTL_RESCUE_MIX", mix)
    monkeypatch.delenv("HARNESSCTL_RESCUE_ENDPOINT", raising=False)
    monkeypatch.setattr(
        agent_loop.ray,
        "nodes",
        lambda: [{"NodeID": "ab" * 28, "Alive": True, "Resources": {"CPU": 2.0}}],
    )
    # verl's classmethod, called as its trainer calls it: no await, no running event loop
    return rescue_manager_class().create(config=config, llm_client=client)


def assert_rows_from_their_own_rollouts(manager, result, requests, rows):
    """Every tensor of each replaced row is one sibling rollout's (its seed's ids)."""
    for row in rows:
        meta = manager.last_rescue["rows"][row]
        (first,) = [r for r in requests if r["seed"] == meta["seed"]]  # that rollout's one call
        offset = 10_000 * (meta["seed"] % 7 + 1)
        prompt = [i + offset for i in toy_prompt(first["messages"])]
        reply = [i + offset for i in toy_ids(ANSWER) + [END]]
        padded = result.batch["prompts"][row]
        assert padded[-len(prompt) :].tolist() == prompt and not padded[: -len(prompt)].any()
        assert result.batch["responses"][row][: len(reply)].tolist() == reply
        assert not result.batch["responses"][row][len(reply) :].any()
        mask = [1] * len(reply) + [0] * (RESPONSE_LENGTH - len(reply))
        assert result.batch["response_mask"][row].tolist() == mask
        logprobs = result.batch["rollout_log_probs"][row]
        assert np.allclose(logprobs[: len(reply)], [-0.01 * (n + 1) for n in range(len(reply))])
        assert not logprobs[len(reply) :].any()
        scores = result.batch["rm_scores"][row]  # the reward on the rollout's last token
        assert scores[len(reply) - 1] == 1.0 and scores.sum() == 1.0
        ids = result.batch["input_ids"][row]
        assert ids.tolist() == padded.tolist() + result.batch["responses"][row].tolist()
        assert meta["outcome"] == "success" and meta["harness"] != "dbbench-base"


def grpo_advantages(result):
    """Each row's advantage as verl's trainer computes it after generation: the reward
    tensor as ``token_level_rewards``, then ``compute_advantage(GRPO)`` grouped by ``uid``."""
    from verl.trainer.ppo.core_algos import AdvantageEstimator
    from verl.trainer.ppo.ray_trainer import compute_advantage

    data = result.select_idxs(list(range(len(result))))  # a copy: the test reads result too
    data.batch["token_level_rewards"] = data.batch["rm_scores"]
    data = compute_advantage(data, AdvantageEstimator.GRPO, norm_adv_by_std_in_grpo=True)
    mask = data.batch["response_mask"].bool()
    return [float(data.batch["advantages"][i][mask[i]][0]) for i in range(len(data))]


def test_the_replace_mix_rescues_every_row_from_its_own_sibling_rollout(
    small_pool, model_dir, tmp_path, monkeypatch
):
    ws, pool, _ = small_pool
    with OpenAIStub(default=seeded_reply(ANSWER)) as stub:
        address = f"127.0.0.1:{stub.port}"  # as the replica's server reports it (port 0 bound)
        config = verl_config(model_dir, tmp_path)
        manager = build(config, llm_client(config, address), monkeypatch, pool, mix="replace")
        result = manager.generate_sequences(batch(dbbench_record(ws)))  # as ray_trainer.py does
        requests = [r.body for r in stub.chat_requests]
    assert isinstance(result, DataProto)
    assert manager.last_rescue["tried"] == ["A"] and manager.last_rescue["replaced"] == ["A"]
    assert {r["model"] for r in requests} == {"stub-model"}  # as the server lists it
    assert {manager.last_rescue["rows"][r]["endpoint"] for r in (0, 1)} == {f"http://{address}/v1"}
    assert len(result) == 4 and result.batch["rm_scores"].sum(-1).tolist() == [1.0, 1.0, 0.0, 1.0]
    assert_rows_from_their_own_rollouts(manager, result, requests, (0, 1))
    # both siblings succeeded: the rescued group is [1, 1], and GRPO trains nothing on it
    assert grpo_advantages(result)[:2] == [0.0, 0.0]
    assert manager.last_rescue["metrics"] == {
        "harnessctl/rescue_groups": 2,
        "harnessctl/rescue_all_fail": 1,
        "harnessctl/rescue_rescued": 1,
        "harnessctl/rescue_rescued_zero_variance": 1,
        "harnessctl/rescue_rescued_rows": 2,
        "harnessctl/rescue_rescued_mean_abs_advantage": 0.0,
    }
    assert result.meta_info["timing"]["harnessctl/rescue_rescued"] == 1  # what verl logs
    assert len({manager.last_rescue["rows"][r]["seed"] for r in (0, 1)}) == 2
    for row in (2, 3):  # a group with a success is never touched
        assert result.batch["responses"][row][:3].tolist() == [7, 8, 0]
        assert np.allclose(result.batch["rollout_log_probs"][row][:2], [-0.1, -0.2])
    assert result.non_tensor_batch["uid"].tolist() == ["A", "A", "B", "B"]
    assert "harnessctl_rescue" not in result.non_tensor_batch
    assert "timing" in result.meta_info  # verl's own manager ran first


def test_the_default_mix_keeps_half_the_base_failures_so_the_rescued_rows_get_advantage(
    small_pool, model_dir, tmp_path, monkeypatch
):
    """The default (``keep-failures``): row 0 of the all-fail group is the sibling's
    success, row 1 keeps its failed base attempt; verl's own GRPO advantage then pushes the
    rescue up and the failure down, and the step's metrics say so."""
    ws, pool, _ = small_pool
    with OpenAIStub(default=seeded_reply(ANSWER)) as stub:
        config = verl_config(model_dir, tmp_path)
        manager = build(config, llm_client(config, f"127.0.0.1:{stub.port}"), monkeypatch, pool)
        result = manager.generate_sequences(batch(dbbench_record(ws)))
        requests = [r.body for r in stub.chat_requests]
    assert manager.last_rescue["replaced"] == ["A"] and set(manager.last_rescue["rows"]) == {0}
    assert_rows_from_their_own_rollouts(manager, result, requests, (0,))
    assert result.batch["responses"][1][:3].tolist() == [7, 8, 0]  # the base failure, kept
    assert result.batch["rm_scores"].sum(-1).tolist() == [1.0, 0.0, 0.0, 1.0]
    advantages = grpo_advantages(result)
    assert advantages[0] > 0.5 and advantages[1] < -0.5  # (1 - 0.5) / std([1, 0]) = 0.707
    metrics = manager.last_rescue["metrics"]
    assert (
        metrics["harnessctl/rescue_rescued"] == 1 and metrics["harnessctl/rescue_rescued_rows"] == 1
    )
    assert metrics["harnessctl/rescue_rescued_zero_variance"] == 0
    assert metrics["harnessctl/rescue_rescued_mean_abs_advantage"] == pytest.approx(
        abs(advantages[0]), rel=1e-5
    )


def test_remax_baseline_rows_are_no_attempt_of_the_group_and_stay_as_they_were(
    small_pool, model_dir, tmp_path, monkeypatch
):
    """verl's REMAX step sends one greedy baseline row per prompt with the sampled rows, under
    the prompt's ``uid`` and ``__do_sample__`` false: the rescue replaces the sampled rows
    of the all-fail group and leaves the baseline rows (whose reward becomes
    ``reward_baselines``) untouched."""
    ws, pool, _ = small_pool
    prompts = batch(dbbench_record(ws))
    prompts.non_tensor_batch["__do_sample__"] = np.ones(4, dtype=bool)
    baselines = prompts.select_idxs([0, 2])  # verl: gen_batch.slice(0, None) per prompt
    baselines.non_tensor_batch["__do_sample__"] = np.zeros(2, dtype=bool)
    prompts = DataProto.concat([prompts, baselines])
    assert prompts.non_tensor_batch["uid"].tolist() == ["A", "A", "B", "B", "A", "B"]
    with OpenAIStub(default=seeded_reply(ANSWER)) as stub:
        config = verl_config(model_dir, tmp_path)
        client = llm_client(config, f"127.0.0.1:{stub.port}")
        manager = build(config, client, monkeypatch, pool, mix="replace")
        result = manager.generate_sequences(prompts)
    assert manager.last_rescue["replaced"] == ["A"] and set(manager.last_rescue["rows"]) == {0, 1}
    assert result.batch["rm_scores"].sum(-1).tolist() == [1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    for row in (4, 5):  # the baselines, as verl's own loop made them
        assert result.batch["responses"][row][:3].tolist() == [7, 8, 0]
    assert result.non_tensor_batch["__do_sample__"].tolist() == [True] * 4 + [False] * 2
    assert manager.last_rescue["metrics"]["harnessctl/rescue_groups"] == 2


def test_an_awaiting_caller_gets_the_same_batch_and_rows_spread_over_the_replicas(
    small_pool, model_dir, tmp_path, monkeypatch
):
    ws, pool, _ = small_pool
    with (
        OpenAIStub(default=seeded_reply(ANSWER)) as one,
        OpenAIStub(default=seeded_reply(ANSWER)) as two,
    ):
        config = verl_config(model_dir, tmp_path)
        client = llm_client(config, f"127.0.0.1:{one.port}", f"127.0.0.1:{two.port}")
        manager = build(config, client, monkeypatch, pool, mix="replace")

        async def trainer_step():
            return await manager.generate_sequences(batch(dbbench_record(ws)))

        result = asyncio.run(trainer_step())
        requests = [r.body for r in one.chat_requests + two.chat_requests]
        assert one.chat_requests and two.chat_requests  # row 0 on one replica, row 1 on the other
    assert manager.last_rescue["replaced"] == ["A"]
    assert_rows_from_their_own_rollouts(manager, result, requests, (0, 1))


def test_a_group_whose_replacement_also_failed_is_kept(
    small_pool, model_dir, tmp_path, monkeypatch
):
    ws, pool, _ = small_pool
    wrong = 'Action: Answer\nFinal Answer: ["nope"]'
    with OpenAIStub(default=seeded_reply(wrong)) as stub:
        config = verl_config(model_dir, tmp_path)
        manager = build(config, llm_client(config, f"127.0.0.1:{stub.port}"), monkeypatch, pool)
        result = manager.generate_sequences(batch(dbbench_record(ws)))
        assert stub.chat_requests  # the siblings were tried
    assert manager.last_rescue["tried"] == ["A"] and manager.last_rescue["replaced"] == []
    assert [r[:2].tolist() for r in result.batch["responses"]] == [[7, 8]] * 4


def test_a_prompt_longer_than_verls_prompt_length_leaves_the_group_as_it_was(
    small_pool, model_dir, tmp_path, monkeypatch
):
    """verl's loops cap a prompt before generating; a rescue rollout was generated from its
    whole prompt, so a longer one is not cut (the row would not be what the policy saw): the
    row comes back as a placeholder verl can pad, and the group is kept."""
    ws, pool, _ = small_pool
    with OpenAIStub(default=seeded_reply(ANSWER)) as stub:
        config = verl_config(model_dir, tmp_path, "actor_rollout_ref.rollout.prompt_length=64")
        manager = build(config, llm_client(config, f"127.0.0.1:{stub.port}"), monkeypatch, pool)
        result = manager.generate_sequences(batch(dbbench_record(ws)))
        assert stub.chat_requests
    assert manager.last_rescue["tried"] == ["A"] and manager.last_rescue["replaced"] == []
    assert result.batch["prompts"].shape == (4, 64)
    assert [r[:2].tolist() for r in result.batch["responses"]] == [[7, 8]] * 4


def test_placeholder_rows_carry_logprobs_like_the_real_rows_beside_them(
    small_pool, model_dir, tmp_path, monkeypatch
):
    """One rescue rollout gets token ids, the other none: both rows reach one worker, whose
    real _postprocess batches a real row and a placeholder (it fails when one lacks
    logprobs); the group is kept, since one of its rows is unusable."""
    ws, pool, _ = small_pool
    seen: list[int] = []
    lock = threading.Lock()

    def first_rollout_only(req):
        with lock:
            if not seen:
                seen.append(int(req["seed"]))
            return int(req["seed"]) == seen[0]

    with OpenAIStub(default=seeded_reply(ANSWER, ids=first_rollout_only)) as stub:
        config = verl_config(model_dir, tmp_path, "actor_rollout_ref.rollout.agent.num_workers=1")
        client = llm_client(config, f"127.0.0.1:{stub.port}")
        manager = build(config, client, monkeypatch, pool, mix="replace")
        rescued = []
        original = manager._splice

        def keep(out, got, *args):
            rescued.append(got)
            return original(out, got, *args)

        monkeypatch.setattr(manager, "_splice", keep)
        result = manager.generate_sequences(batch(dbbench_record(ws)))
    (got,) = rescued
    assert got.batch["rollout_log_probs"].shape == (2, RESPONSE_LENGTH)
    assert sorted(got.batch["response_mask"].sum(-1).tolist())[0] == 0  # the placeholder
    assert manager.last_rescue["replaced"] == [] and "rollout_log_probs" in result.batch


def test_rows_written_to_parquet_reach_the_rescue_through_verls_own_dataset(
    small_pool, model_dir, tmp_path, monkeypatch
):
    """The documented path: ``to_verl_rows`` over the DBBench dev split (table rows of mixed
    types), ``pandas.to_parquet``, verl's ``RLHFDataset`` (``datasets`` underneath, its
    prompt-length filter run with the model's tokenizer) and ``collate_fn``, the batch
    repeated per group as verl's trainer does; the rescue decodes the row's task and
    solves it."""
    import pandas as pd
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from harnessctl.suite import load_suite

    ws, pool, _ = small_pool
    tasks = load_suite(ws / "examples" / "dbbench" / "suite.yaml").tasks("dev").tasks
    pd.DataFrame(to_verl_rows(tasks)).to_parquet(tmp_path / "train.parquet")
    options = {"max_prompt_length": PROMPT_LENGTH, "filter_overlong_prompts": True}
    dataset = RLHFDataset(
        str(tmp_path / "train.parquet"),
        AutoTokenizer.from_pretrained(model_dir),
        OmegaConf.create({**options, "cache_dir": str(tmp_path / "cache")}),
    )
    assert len(dataset) == len(tasks) == 60
    prompts = DataProto.from_single_dict(collate_fn([dataset[4], dataset[3]]))
    prompts.non_tensor_batch["uid"] = column(["A", "B"])  # as ray_trainer.py sets it
    prompts = prompts.repeat(repeat_times=2, interleave=True)
    prompts.meta_info["global_steps"] = 5
    assert prompts.non_tensor_batch["index"].tolist() == [4, 4, 3, 3]
    with OpenAIStub(default=seeded_reply(ANSWER)) as stub:
        config = verl_config(model_dir, tmp_path)
        manager = build(config, llm_client(config, f"127.0.0.1:{stub.port}"), monkeypatch, pool)
        result = manager.generate_sequences(prompts)
        first = stub.chat_requests[0].body["messages"]
    assert manager.last_rescue["replaced"] == ["A"]
    assert any(tasks[4].record["description"] in str(m["content"]) for m in first)
    assert result.batch["rm_scores"].sum(-1).tolist()[0] == 1.0


def test_the_rescue_calls_the_model_by_the_name_the_rollout_server_serves(
    small_pool, model_dir, tmp_path, monkeypatch
):
    """verl's vLLM server serves ``model_config.local_path`` (a hub id's snapshot) or a
    served name, never necessarily ``model.path``: the rescue asks the server."""
    ws, pool, _ = small_pool
    snapshot = "/root/.cache/huggingface/hub/models--org--policy/snapshots/0123abcd"
    with OpenAIStub(default=seeded_reply(ANSWER)) as stub:
        stub.models = [snapshot]
        config = verl_config(model_dir, tmp_path)
        manager = build(config, llm_client(config, f"127.0.0.1:{stub.port}"), monkeypatch, pool)
        manager.generate_sequences(batch(dbbench_record(ws)))
        assert {r.body["model"] for r in stub.chat_requests} == {snapshot}
    assert manager.last_rescue["replaced"] == ["A"]


def test_the_served_name_is_the_configs_when_listed_or_unlisted_and_refused_when_ambiguous(
    model_dir, tmp_path
):
    from harnessctl.integrations.verl import served_model_name

    named = verl_config(
        model_dir,
        tmp_path,
        "actor_rollout_ref.rollout.prometheus.enable=True",
        "actor_rollout_ref.rollout.prometheus.served_model_name=org/policy-7b",
    )
    plain = verl_config(model_dir, tmp_path)
    with OpenAIStub() as stub:
        stub.models = ["policy-7b", "policy-7b-lora"]  # verl cuts the name to its last part
        assert served_model_name(stub.url, named) == "policy-7b"
        stub.models = ["lora-a", str(model_dir)]
        assert served_model_name(stub.url, plain) == str(model_dir)
        stub.models = ["lora-a", "lora-b"]
        with pytest.raises(RuntimeError, match="lora-a, lora-b.*served_model_name"):
            served_model_name(stub.url, plain)
        stub.models_status = 404  # a server without a model list: the config's name
        assert served_model_name(stub.url, plain) == str(model_dir)


def test_verls_transfer_queue_trainer_is_refused_with_the_setting_to_change(model_dir, tmp_path):
    from harnessctl.integrations.verl import RescueAgentLoopManager

    config = verl_config(model_dir, tmp_path, "trainer.use_v1=True")
    with pytest.raises(RuntimeError, match=r"trainer\.use_v1=False"):
        RescueAgentLoopManager.create(config=config, llm_client=llm_client(config))


def test_the_endpoint_setting_overrides_the_replicas_and_none_at_all_is_an_error(
    small_pool, model_dir, tmp_path, monkeypatch
):
    ws, pool, _ = small_pool
    with OpenAIStub(default=seeded_reply(ANSWER)) as stub:
        config = verl_config(model_dir, tmp_path)
        manager = build(config, llm_client(config, "127.0.0.1:9"), monkeypatch, pool)
        monkeypatch.setenv("HARNESSCTL_RESCUE_ENDPOINT", stub.url)  # e.g. a router in front
        manager.generate_sequences(batch(dbbench_record(ws)))
        assert stub.chat_requests
    assert manager.last_rescue["replaced"] == ["A"]
    assert {m["endpoint"] for m in manager.last_rescue["rows"].values()} == {stub.url}
    monkeypatch.delenv("HARNESSCTL_RESCUE_ENDPOINT")
    empty = build(config, llm_client(config), monkeypatch, pool)
    with pytest.raises(RuntimeError, match="HARNESSCTL_RESCUE_ENDPOINT"):
        empty.generate_sequences(batch(dbbench_record(ws)))
