"""ART contract test for ``harnessctl.integrations.art`` (a real pool, a vLLM-shaped stub).

Each test runs twice: against ART's own classes (``openpipe-art`` 0.5.18) and against
stand-ins that follow its files. ART is no dependency of harnessctl because it pins
``litellm<=1.82``: .ci/run installs it in a virtual environment of its own (with CPU torch and
transformers, which its tokenizer imports) and runs this file there with
``HARNESSCTL_TEST_ART=1``, where the ART half must run (it fails, not skips, when ART does
not import); elsewhere that half is skipped. There, ART's own tokenizer
(``art/preprocessing/tokenize.py``) also runs on a rescued group. The stand-ins follow:

- ``art/trajectories.py``: ``Trajectory`` (``messages_and_choices``, ``tools``,
  ``additional_histories``, ``reward``, ``metrics``, ``metadata`` of scalars, ``logs``),
  ``History``, ``TrajectoryGroup(trajectories, *, exceptions, metadata, metrics, logs)`` and
  ``get_messages`` (a ``Choice`` read as an assistant message);
- ``art/gather.py``: ``gather_trajectory_groups(groups, after_each=...)`` awaits each group,
  then ``after_each``, whose result replaces it (``None`` drops it, a list extends);
- ``art/preprocessing/tokenize.py``: an assistant turn is trained when it is a ``Choice``
  with logprobs, its ids read from ``token_id:<id>`` tokens.
"""

import asyncio
import os
from typing import Any

import pytest
from openai.types.chat.chat_completion import Choice
from pydantic import BaseModel, ConfigDict

from harnessctl.integrations.art import rescue_after_each, to_trajectory
from harnessctl.pool import EndpointPolicy, Pool, RolloutOutput
from harnessctl.pool.advantage import RescueMetrics, group_advantages
from harnessctl.records import ModelCall
from tests.helpers.openai_stub import OpenAIStub
from tests.helpers.pools import dbbench_record, dbbench_turns, vllm_reply

Scalar = float | int | str | bool | None
#: read at import: the autouse isolation fixture clears HARNESSCTL_* variables
ART_HALF = bool(os.environ.get("HARNESSCTL_TEST_ART"))


class History(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    messages_and_choices: list[Choice | dict[str, Any]]
    tools: list[dict[str, Any]] | None = None


class Trajectory(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    messages_and_choices: list[Choice | dict[str, Any]] = []
    tools: list[dict[str, Any]] | None = None
    additional_histories: list[History] = []
    reward: float = 0.0
    initial_policy_version: int | None = None
    final_policy_version: int | None = None
    metrics: dict[str, float | int | bool] = {}
    metadata: dict[str, Scalar] = {}
    logs: list[str] = []

    def messages(self):
        return [
            {"role": "assistant", "content": m.message.content or ""}
            if isinstance(m, Choice)
            else {**m, "content": m.get("content") or ""}
            for m in self.messages_and_choices
        ]


class TrajectoryGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")
    trajectories: list[Trajectory]
    exceptions: list[Any] = []
    metadata: dict[str, Scalar] = {}
    metrics: dict[str, float | int | bool] = {}
    logs: list[str] = []

    def __init__(self, trajectories, *, exceptions=(), metadata=None, metrics=None, logs=None):
        super().__init__(
            trajectories=list(trajectories),
            exceptions=list(exceptions),
            metadata=metadata or {},
            metrics=metrics or {},
            logs=logs or [],
        )


async def gather_trajectory_groups(groups, *, after_each=None):
    async def one(awaitable):
        group = await awaitable
        return group if after_each is None else await after_each(group)

    out = []
    for g in await asyncio.gather(*(one(g) for g in groups)):
        out.extend(g if isinstance(g, list) else [] if g is None else [g])
    return out


def real_art():
    if not ART_HALF:
        pytest.skip("ART's half runs in ART's own environment (HARNESSCTL_TEST_ART=1, .ci/run)")
    try:
        import art
    except ImportError as exc:
        pytest.fail(f"HARNESSCTL_TEST_ART is set but openpipe-art does not import: {exc}")
    return art.Trajectory, art.TrajectoryGroup, art.gather_trajectory_groups


@pytest.fixture(params=["contract", "art"])
def art(request):
    if request.param == "art":
        return real_art()
    return Trajectory, TrajectoryGroup, gather_trajectory_groups


@pytest.fixture(scope="module")
def pool_dir(small_pool):
    ws, out, _ = small_pool
    return ws, out


def seeded(req):
    return 10_000 * req.get("seed", 0)


def token_ids(choice):
    """The ids ART trains on for a Choice (art/preprocessing/tokenize.py)."""
    return [int(t.token.split(":")[1]) for t in choice.logprobs.content]


@pytest.mark.parametrize("mix", ["keep-failures", "replace"])
def test_all_fail_groups_are_rescued_by_their_sibling_rollouts(pool_dir, art, mix):
    """Under keep-failures (the default: no ``mix`` given) the first half of a rescued group's
    trajectories are sibling rollouts and the rest its base failures; under replace every one
    is a sibling rollout. The batch's RescueMetrics say so."""
    trajectory_cls, group_cls, gather = art
    ws, out = pool_dir
    tasks = {"solvable": dbbench_record(ws, 4), "unsolvable": dbbench_record(ws, 5)}

    def group(task, *rewards):
        trajectories = [
            trajectory_cls(
                messages_and_choices=[{"role": "user", "content": task}],
                reward=r,
                metadata={"task": task, "base": n},
            )
            for n, r in enumerate(rewards)
        ]
        failed = [RuntimeError("a rollout that raised")]
        return group_cls(trajectories, exceptions=failed, metadata={"batch": 1, "task": task})

    async def ready(g):
        return g

    originals = [group("solvable", 0.0, 0.0), group("unsolvable", 0.0, -1.0),
                 group("solvable", 1.0, 0.0)]  # fmt: skip
    given = {} if mix == "keep-failures" else {"mix": mix}
    with OpenAIStub(vllm_reply(dbbench_turns, offset=seeded)) as stub, Pool.load(out) as pool:
        policy = EndpointPolicy(stub.url, "Qwen/Qwen2.5-7B-Instruct", tokens=True)
        hook = rescue_after_each(pool, policy, task_of=lambda g: tasks[g.metadata["task"]], **given)
        groups = asyncio.run(gather([ready(g) for g in originals], after_each=hook))
    fresh_rows = [0] if mix == "keep-failures" else [0, 1]
    assert len(groups) == 3 and groups[1] is originals[1] and groups[2] is originals[2]
    assert (hook.tried, hook.rescued, hook.extra_rollouts) == (2, 1, 2 * len(fresh_rows))
    rescued = groups[0]
    assert type(rescued) is group_cls and rescued.metadata["batch"] == 1
    assert rescued.exceptions == originals[0].exceptions and len(rescued.exceptions) == 1
    rollouts = {o.rollout_id: o for r in hook.results for o in r.attempted}
    assert len(rescued.trajectories) == 2
    for place, trajectory in enumerate(rescued.trajectories):
        assert trajectory.metadata["base"] == place  # the replaced trajectory's, kept
        if place not in fresh_rows:  # a base failure, kept as it was
            assert trajectory == originals[0].trajectories[place]
            assert "harnessctl_rollout_id" not in trajectory.metadata
            continue
        rollout: RolloutOutput = rollouts[trajectory.metadata["harnessctl_rollout_id"]]
        assert type(trajectory) is trajectory_cls and rollout.success
        assert trajectory.reward == rollout.reward == 1.0
        assert trajectory.metadata["task"] == "solvable"
        assert trajectory.metadata["harnessctl_harness"] == rollout.harness
        assert trajectory.metadata["harnessctl_seed"] == rollout.seed == place
        assert trajectory.messages() == rollout.messages  # what ART's chat template sees
        choices = [m for m in trajectory.messages_and_choices if isinstance(m, Choice)]
        assert len(choices) == len(rollout.calls) == 2 and not trajectory.additional_histories
        for choice, call in zip(choices, rollout.calls, strict=True):
            assert token_ids(choice) == call.completion_ids  # ids of this rollout's seed
            assert call.completion_ids[0] >= 10_000 * rollout.seed
            assert [t.logprob for t in choice.logprobs.content] == call.logprobs
    rewards = [t.reward for t in rescued.trajectories]
    advantages = group_advantages(rewards)
    assert hook.take_metrics() == RescueMetrics(
        groups=3,
        all_fail=2,
        rescued=1,
        rescued_zero_variance=int(len(set(rewards)) == 1),  # replace: all ones, advantage 0
        rescued_rows=len(fresh_rows),
        rescued_mean_abs_advantage=sum(abs(advantages[i]) for i in fresh_rows) / len(fresh_rows),
    )
    assert hook.take_metrics() == RescueMetrics()  # the next batch starts from nothing
    if mix == "keep-failures":
        assert rewards == [1.0, 0.0] and advantages[0] > 0.7  # a gradient on the rescue


def test_an_unknown_mix_is_refused():
    with pytest.raises(ValueError, match="keep-failures, replace"):
        rescue_after_each(None, None, task_of=lambda g: None, mix="half")


def test_a_rewritten_context_becomes_an_additional_history(art):
    trajectory_cls, _, _ = art
    system = {"role": "system", "content": "s"}
    first = ModelCall(index=0, model="m", messages=[system, {"role": "user", "content": "q"}],
                      reply="a", completion_ids=[1, 2], logprobs=[-0.1, -0.2])  # fmt: skip
    summary = [system, {"role": "user", "content": "q, and a summary"}]
    second = ModelCall(index=1, model="m", messages=summary, reply="b")  # no token capture
    rollout = RolloutOutput(
        harness="h", harness_hash="x" * 64, task_id="t", seed=3, outcome="success", reward=1.0,
        messages=[*summary, {"role": "assistant", "content": "b"}], usage=[], rollout_id="r",
        calls=[first, second],
    )  # fmt: skip
    trajectory = to_trajectory(rollout, trajectory_cls, pool_id="p")
    assert trajectory.messages_and_choices == [*summary, {"role": "assistant", "content": "b"}]
    (history,) = trajectory.additional_histories
    *context, choice = history.messages_and_choices
    assert context == first.messages and token_ids(choice) == [1, 2]
    assert trajectory.metadata["harnessctl_rollout_id"] == "r"
    assert trajectory.metadata["harnessctl_pool"] == "p"


def test_arts_own_tokenizer_trains_on_exactly_the_rescued_rollouts_tokens(pool_dir, tmp_path):
    """ART's tokenize_trajectory_groups on a rescued group: the tokens it trains on
    (assistant mask 1) are, turn by turn, the server's ids of that trajectory's one sibling
    rollout, with its logprobs; ART's advantage comes from the rollouts' rewards."""
    trajectory_cls, group_cls, gather = real_art()
    from art.preprocessing.tokenize import tokenize_trajectory_groups
    from transformers import AutoTokenizer

    from tests.helpers.tiny_model import make_tokenizer_dir

    ws, out = pool_dir
    task = dbbench_record(ws, 4)
    failed = trajectory_cls(messages_and_choices=[{"role": "user", "content": "q"}], reward=0.0)

    async def ready():
        return group_cls([failed, failed.model_copy()], metadata={"task": "solvable"})

    with OpenAIStub(vllm_reply(dbbench_turns, offset=seeded)) as stub, Pool.load(out) as pool:
        policy = EndpointPolicy(stub.url, "Qwen/Qwen2.5-7B-Instruct", tokens=True)
        hook = rescue_after_each(pool, policy, task_of=lambda g: task, mix="replace")
        (group,) = asyncio.run(gather([ready()], after_each=hook))
    assert hook.rescued == 1
    rollouts = {o.rollout_id: o for r in hook.results for o in r.attempted}
    tokenizer = AutoTokenizer.from_pretrained(str(make_tokenizer_dir(tmp_path / "tok")))
    results = list(
        tokenize_trajectory_groups(
            tokenizer,
            [group],
            allow_training_without_logprobs=False,
            scale_rewards=False,
            shuffle_group_trajectories=False,
            drop_zero_advantage_trajectories=False,
        )
    )
    assert len(results) == len(group.trajectories) == 2
    for result in results:
        rollout = rollouts[result.trajectory.metadata["harnessctl_rollout_id"]]
        assert result.advantage == rollout.reward - sum(t.reward for t in group.trajectories) / 2
        trained = [t for t, m in zip(result.token_ids, result.assistant_mask, strict=True) if m]
        expected = [i for call in rollout.calls for i in call.completion_ids]
        assert trained == expected and trained[0] >= 10_000 * rollout.seed
        logprobs = [p for p, m in zip(result.logprobs, result.assistant_mask, strict=True) if m]
        assert logprobs == [p for call in rollout.calls for p in call.logprobs]
        turns = [i for i, m in enumerate(result.assistant_mask) if m]
        assert len(result.choice_offsets) == len(rollout.calls) == 2
        assert result.choice_offsets[0] == turns[0]
