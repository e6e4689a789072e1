"""Trainer helpers with a fake pool (the real pool path is tests/test_pool.py)."""

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
    pool = FakePool()
    result = rescue_batch(
        pool,
        BATCH,
        policy=None,
        task_of=lambda s: s["task"],
        convert=lambda out, s: {**s, "reward": out.reward, "by": out.harness},
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
    )
    assert [s.get("by") for s in again.samples] == [s.get("by") for s in out]


def test_splice_checks_group_sizes():
    with pytest.raises(ValueError, match="u1"):
        splice(BATCH, {"u1": [{"uid": "u1"}]})
