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


# -- the rescue daemon, through agl.VERL's own entrypoint --------------------------------------

WRONG = 'Action: Answer\nFinal Answer: ["2.0"]'


def base_fails(req):
    """The base rollouts (seed 0) answer wrongly; every other seed plays the two right turns."""
    return WRONG if req.get("seed", 0) == 0 else dbbench_turns(req)


@pytest.fixture(scope="module")
def verl_daemon(agl):
    try:
        from agentlightning.verl.daemon import AgentModeDaemon
    except ImportError as exc:
        pytest.fail(
            f"HARNESSCTL_TEST_AGL is set but Agent Lightning's VERL daemon does not import: {exc}"
        )
    from harnessctl.integrations.agentlightning import RescueDaemon

    assert issubclass(RescueDaemon, AgentModeDaemon)
    return RescueDaemon


@pytest.fixture(scope="module")
def ray_cluster(verl_daemon):
    """One local Ray for the module's runs (run_ppo starts one only when none is up): a Ray
    restarted in one process may time out waiting for its GCS on a busy machine."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


def cpu_trainer(backend: str, out: str):
    """verl's trainer as Agent Lightning subclasses it, with only what a CPU cannot run stood
    in for: ``init_workers`` (verl's FSDP actor and vLLM replicas, on GPUs) gives the
    replicas' address (the OpenAI stub) and an actor whose first call, the old log-probs of
    the built batch, records the batch and the daemon's rescue and stops the run. Everything
    before it (``fit``, the daemon, ``_train_step`` up to there) is Agent Lightning's and
    verl's own code. Classes made here travel to Ray's TaskRunner by value."""
    import json

    from agentlightning.verl.trainer import AgentLightningTrainer

    class Replicas:
        server_addresses = [backend]

        def wake_up(self):
            pass

        def sleep(self):
            pass

    class StopAtTheGPU:
        world_size = 1

        def __init__(self, trainer):
            self.trainer = trainer

        def compute_log_prob(self, batch):
            daemon = self.trainer.agent_mode_daemon
            record = {
                "daemon": [c.__name__ for c in type(daemon).__mro__],
                "last_rescue": daemon.last_rescue,
                "rollouts": batch.non_tensor_batch["rollout_id_list"].tolist(),
                "uids": batch.non_tensor_batch["uid"].tolist(),
                "scores": batch.batch["token_level_scores"].sum(-1).float().tolist(),
                "responses": batch.batch["responses"].tolist(),
            }
            with open(out, "w") as f:
                json.dump(record, f)
            raise RuntimeError("harnessctl test: verl's GPU stage (old log-probs) reached")

    class CPUTrainer(AgentLightningTrainer):
        def init_workers(self):
            self.async_rollout_mode = True
            self.async_rollout_manager = Replicas()
            self.actor_rollout_wg = StopAtTheGPU(self)

    return CPUTrainer


def verl_config(model_dir):
    """agl.VERL's overrides for one step of 2 rows x 2 rollouts (verl 0.5.0's config)."""
    return {
        "algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False},
        "data": {"train_batch_size": 2, "max_prompt_length": 512, "max_response_length": 64},
        "actor_rollout_ref": {
            "model": {"path": str(model_dir)},
            "rollout": {"n": 2, "name": "vllm", "log_prob_micro_batch_size_per_gpu": 2},
            "actor": {
                "ppo_mini_batch_size": 2,
                "ppo_micro_batch_size_per_gpu": 2,
                "use_kl_loss": False,
            },
            "ref": {"log_prob_micro_batch_size_per_gpu": 2},
        },
        "trainer": {
            "n_gpus_per_node": 1,
            "nnodes": 1,
            "logger": ["console"],
            "val_before_train": False,
            "total_epochs": 1,
            "test_freq": 0,
            "save_freq": 0,
            "default_local_dir": str(model_dir.parent / "checkpoints"),
        },
        "ray_init": {"num_cpus": 2},
    }


def fit(agl, daemon_cls, trainer_cls, small_pool, tmp_path):
    """``agl.Trainer(algorithm=agl.VERL(config, daemon_cls=..., trainer_cls=...)).fit(...)``
    on rows A (base seed 0: fails) and B (seed 7: succeeds); what it raised, the stub's
    requests."""
    from harnessctl.integrations.agentlightning import HarnessAgent
    from harnessctl.pool.rows import task_columns
    from tests.helpers.tiny_model import make_tokenizer_dir

    ws, out, _ = small_pool
    record = dbbench_record(ws, 4)
    rows = [{**task_columns(record, 0), "harnessctl_seed": 0},
            {**task_columns(record, 1), "harnessctl_seed": 7}]  # fmt: skip
    model_dir = make_tokenizer_dir(tmp_path / "model")
    with OpenAIStub(vllm_reply(base_fails, offset=lambda r: r.get("seed", 0))) as stub:
        backend = stub.url.removeprefix("http://").removesuffix("/v1")
        cls = trainer_cls(backend, str(tmp_path / "step.json")) if trainer_cls else None
        algorithm = agl.VERL(verl_config(model_dir), daemon_cls=daemon_cls, trainer_cls=cls)
        # the proxy's spans carry the server's token ids: the batch's rows are built from them
        # OtelTracer: the runner's own spans (the reward) without AgentOps, which writes
        # agentops.log into the working directory
        trainer = agl.Trainer(
            algorithm=algorithm,
            n_runners=1,
            adapter=agl.LlmProxyTraceToTriplet(),
            tracer=agl.OtelTracer(),
        )
        with Pool.load(out) as pool, pytest.raises(Exception) as raised:
            trainer.fit(HarnessAgent(pool), train_dataset=rows, val_dataset=rows)
        return raised.value, [r.body for r in stub.chat_requests]


def test_agl_verls_entrypoint_stops_where_a_cpu_must_at_verls_gpu_workers(
    agl, verl_daemon, ray_cluster, small_pool, tmp_path
):
    """The unchanged entrypoint (run_ppo, Ray's TaskRunner, the tokenizer, verl's FSDP worker
    classes, reward manager, datasets, sampler and AgentLightningTrainer) runs until verl
    asks Ray for the GPUs of its worker pool."""
    raised, requests = fit(agl, verl_daemon, None, small_pool, tmp_path)
    assert "Total available GPUs 0 is less than total desired GPUs 1" in str(raised)
    assert requests == []


@pytest.mark.parametrize("mix", ["keep-failures", "replace"])
def test_agl_verl_with_the_rescue_daemon_rescues_an_all_fail_group(
    agl, verl_daemon, ray_cluster, small_pool, tmp_path, mix
):
    """Through agl.Trainer and agl.VERL's entrypoint (only verl's GPU workers stood in for,
    see cpu_trainer), with Agent Lightning's store, LLM proxy, runner and adapter: row A's
    base rollouts all fail, so the RescueDaemon queues fresh rollouts of it under the pool's
    siblings (under keep-failures its first row, under replace both), they succeed, and the
    batch AgentLightningTrainer gets holds them, built from the proxy's tokens, with A's
    kept base failure beside them; the step's RescueMetrics are in the daemon."""
    import json

    from harnessctl.pool.advantage import group_advantages
    from tests.helpers.pools import toy_ids

    _, pool_dir, _ = small_pool
    daemon = type("Rescue", (verl_daemon,), {"pool_dir": str(pool_dir), "rescue_mix": mix})
    raised, requests = fit(agl, daemon, cpu_trainer, small_pool, tmp_path)
    assert "verl's GPU stage (old log-probs) reached" in str(raised)
    step = json.loads((tmp_path / "step.json").read_text())
    assert "RescueDaemon" in step["daemon"] and "AgentModeDaemon" in step["daemon"]
    rescue = step["last_rescue"]
    (group_a,) = rescue["tried"]
    assert rescue["rescued"] == [group_a]
    fresh = 1 if mix == "keep-failures" else 2
    # the rollouts' calls (each sends its seed); the proxy's health probe sends none
    seeds = sorted(b["seed"] for b in requests if "seed" in b)
    assert seeds.count(0) == 2 and seeds.count(7) == 4  # A's failures (1 call), B's (2 calls)
    assert len([s for s in seeds if s >= 100_003]) == 2 * fresh  # step 1's rescue seeds
    rows = list(zip(step["uids"], step["rollouts"], step["scores"], step["responses"], strict=True))
    a_rows = [r for r in rows if r[0] == group_a]
    b_rows = [r for r in rows if r[0] != group_a]
    assert len(b_rows) == 4 and all(score == 1.0 for *_, score, _ in b_rows)
    a_rollouts = list(dict.fromkeys(rid for _, rid, _, _ in a_rows))
    assert len(a_rollouts) == 2  # the group keeps its size: rows swapped, none added
    scores = {rid: score for _, rid, score, _ in a_rows}
    for *_, score, response in a_rows:
        if score == 1.0:  # a sibling's rollout: the token ids its seed's calls returned
            assert response[0] >= 100_003
        else:  # the base failure kept, its one call's tokens
            assert response[: len(toy_ids(WRONG))] == toy_ids(WRONG)
    final = [scores[rid] for rid in a_rollouts]
    assert sorted(final) == ([0.0, 1.0] if mix == "keep-failures" else [1.0, 1.0])
    advantages = group_advantages(sorted(final))
    rescued_adv = [abs(a) for a, r in zip(advantages, sorted(final), strict=True) if r == 1.0]
    assert rescue["metrics"] == {
        "harnessctl/rescue_groups": 2,
        "harnessctl/rescue_all_fail": 1,
        "harnessctl/rescue_rescued": 1,
        "harnessctl/rescue_rescued_zero_variance": int(mix == "replace"),
        "harnessctl/rescue_rescued_rows": fresh,
        "harnessctl/rescue_rescued_mean_abs_advantage": pytest.approx(
            sum(rescued_adv) / len(rescued_adv)
        ),
    }


def test_the_rescue_daemon_refuses_another_agentlightning_and_the_v0_mode(agl, verl_daemon):
    from harnessctl.integrations.agentlightning import check_agentlightning

    check_agentlightning()  # the installed one is the one it follows
    with pytest.raises(RuntimeError, match=r"follows agentlightning 0\.3\.0.*0\.4\.0 is installed"):
        check_agentlightning("0.4.0")
    with pytest.raises(RuntimeError, match="v1 mode only"):
        verl_daemon(9999, 2, {"model": MODEL}, tokenizer=None, mini_batch_size=2,
                    pad_token_id=0, mode="v0")  # fmt: skip
