"""Trainer helpers with a fake pool (the real pool path is tests/pool/test_pool.py)."""

from dataclasses import dataclass

import pytest

from harnessctl.pool.trainer import all_fail_uids, group_by_uid, rescue_batch, splice


@dataclass
class Out:
    harness: str
    success: bool

    @property
    def reward(self):
        return 1.0 if self.success else 0.0


class FakePool:
    """Routes to two siblings; 'b' succeeds on task 't2' only."""

    def __init__(self):
        self.calls = []

    def route(self, task, failures, k=2):
        return ["a", "b"][:k]

    def harness(self, name):
        pool = self

        class H:
            def rollout(self, task, policy, seed=0):
                pool.calls.append((name, task, seed))
                return Out(name, name == "b" and task == "t2")

        return H()


BATCH = [
    {"uid": "u1", "task": "t1", "reward": 0.0},
    {"uid": "u2", "task": "t2", "reward": 0.0},
    {"uid": "u1", "task": "t1", "reward": 0.0},
    {"uid": "u3", "task": "t3", "reward": 1.0},
    {"uid": "u2", "task": "t2", "reward": 0.0},
    {"uid": "u3", "task": "t3", "reward": 0.0},
]


def test_grouping_and_all_fail_detection():
    assert group_by_uid(BATCH) == {"u1": [0, 2], "u2": [1, 4], "u3": [3, 5]}
    assert all_fail_uids(BATCH) == ["u1", "u2"]


def test_rescue_batch_replaces_only_rescued_all_fail_groups_in_place():
    """The ``replace`` mix: every row of a rescued group is a sibling rollout."""
    pool = FakePool()
    result = rescue_batch(
        pool,
        BATCH,
        policy=None,
        task_of=lambda s: s["task"],
        convert=lambda out, s: {**s, "reward": out.reward, "by": out.harness},
        mix="replace",
    )
    assert result.tried_uids == ["u1", "u2"] and result.rescued_uids == ["u2"]
    assert result.extra_rollouts == 4
    out = result.samples
    assert out[0] is BATCH[0] and out[2] is BATCH[2]  # u1: replacement all-fail, kept
    assert out[1]["by"] == "a" and out[4]["by"] == "b" and out[4]["reward"] == 1.0
    assert out[3] is BATCH[3] and out[5] is BATCH[5]  # u3 had a success: untouched
    assert {c[1] for c in pool.calls} == {"t1", "t2"}
    again = rescue_batch(
        FakePool(),
        BATCH,
        policy=None,
        task_of=lambda s: s["task"],
        convert=lambda out, s: {**s, "by": out.harness},
        mix="replace",
    )
    assert [s.get("by") for s in again.samples] == [s.get("by") for s in out]


def test_splice_checks_group_sizes():
    with pytest.raises(ValueError, match="u1"):
        splice(BATCH, {"u1": [{"uid": "u1"}]})


def test_a_group_result_counts_as_a_success_only_by_its_success_or_reward():
    from types import SimpleNamespace

    from harnessctl.pool.sampler import _success

    assert _success({"reward": 1.0}) and not _success({"success": False, "reward": 0})
    assert _success(SimpleNamespace(reward=0.5)) and not _success(SimpleNamespace(reward=0.0))
    assert _success(True) and not _success(0.0)
    with pytest.raises(TypeError, match="success"):  # truthy, but says nothing
        _success(SimpleNamespace(messages=["hi"]))


def test_token_ids_are_read_wherever_the_server_and_litellm_put_them():
    from types import SimpleNamespace as NS

    from harnessctl.gateway.llm import token_capture

    def response(choice, **top):
        return NS(choices=[NS(**{"token_ids": None, "logprobs": None, **choice})], **top)

    def entries(*tokens, ids=None):
        return NS(content=[
            NS(token=t, logprob=-0.5, id=None if ids is None else ids[n])
            for n, t in enumerate(tokens)
        ])  # fmt: skip

    vllm = response({"token_ids": [5, 6], "logprobs": entries("a", "b")}, prompt_token_ids=[1])
    assert token_capture(vllm) == ([1], [5, 6], [-0.5, -0.5])
    older = response({"provider_specific_fields": {"token_ids": [7]}})  # litellm <= 1.82
    assert token_capture(older) == (None, [7], None)
    llama = response({"logprobs": entries("x", "y", ids=[11, 12])})
    assert token_capture(llama) == (None, [11, 12], [-0.5, -0.5])
    as_tokens = response({"logprobs": entries("token_id:3", "token_id:4")})
    assert token_capture(as_tokens)[1] == [3, 4]
    plain = response({"logprobs": entries("x", "y")})  # no ids anywhere: none made up
    assert token_capture(plain) == (None, None, [-0.5, -0.5])
