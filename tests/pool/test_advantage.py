"""How a rescued group is formed (the ``mix``) and what GRPO makes of it, computed by verl's
own ``compute_grpo_outcome_advantage``; the batch rescue's metrics agree with it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from harnessctl.pool import MIXES, group_advantages, rescue_batch, rescue_group, rescue_metrics
from harnessctl.pool.sampler import fresh_rows
from tests.helpers.ci import unavailable

try:
    import torch
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
except ImportError as exc:  # pragma: no cover - CI installs verl (.ci/run)
    unavailable("verl's GRPO advantage", f"verl does not import here: {exc}", module=True)


@dataclass
class Out:
    harness: str
    success: bool

    @property
    def reward(self) -> float:
        return 1.0 if self.success else 0.0


class EverySiblingSucceeds:
    """A pool whose two siblings solve every task (the case that trains nothing under
    ``replace``)."""

    def __init__(self):
        self.calls = []

    def route(self, task, failures, k=2):
        return ["a", "b"][:k]

    def harness(self, name):
        calls = self.calls

        class Harness:
            def rollout(self, task, policy, seed=0):
                calls.append((name, task, seed))
                return Out(name, True)

        return Harness()


def verl_grpo(rewards: list[float], uids: list) -> list[float]:
    """verl's GRPO outcome advantage of each row (one-token responses)."""
    scores = torch.tensor(rewards, dtype=torch.float32).unsqueeze(-1)
    advantages, _ = compute_grpo_outcome_advantage(
        token_level_rewards=scores,
        response_mask=torch.ones_like(scores),
        index=np.array(uids, dtype=object),
    )
    return advantages.squeeze(-1).tolist()


GROUP = 4
BATCH = [{"uid": u, "task": u, "reward": 0.0} for u in ("t1", "t2") for _ in range(GROUP)]
BATCH += [{"uid": "t3", "task": "t3", "reward": float(i == 0)} for i in range(GROUP)]


def rescued(mix: str):
    pool = EverySiblingSucceeds()
    result = rescue_batch(
        pool,
        BATCH,
        policy=None,
        task_of=lambda s: s["task"],
        convert=lambda out, s: {**s, "reward": out.reward, "by": out.harness},
        mix=mix,
    )
    return pool, result


def test_replace_makes_an_all_success_group_that_verls_grpo_gives_no_advantage():
    pool, result = rescued("replace")
    rewards = [s["reward"] for s in result.samples]
    assert rewards[: 2 * GROUP] == [1.0] * 2 * GROUP and len(pool.calls) == 2 * GROUP
    advantages = verl_grpo(rewards, [s["uid"] for s in result.samples])
    assert advantages[: 2 * GROUP] == [0.0] * 2 * GROUP  # no gradient from the rescue
    assert result.metrics.rescued == 2 and result.metrics.rescued_zero_variance == 2
    assert result.metrics.rescued_mean_abs_advantage == 0.0


def test_keep_failures_keeps_half_the_base_failures_and_the_rescued_rows_get_advantage():
    pool, result = rescued("keep-failures")
    samples = result.samples
    assert len(pool.calls) == GROUP  # half the fresh rollouts of replace
    for start in (0, GROUP):  # rows 0-1 of each group are sibling rollouts, 2-3 the base's
        assert [s.get("by") for s in samples[start : start + GROUP]] == ["a", "b", None, None]
        assert samples[start + 2] is BATCH[start + 2] and samples[start + 3] is BATCH[start + 3]
    assert result.results["t1"].rows == [0, 1]
    rewards = [s["reward"] for s in samples]
    advantages = verl_grpo(rewards, [s["uid"] for s in samples])
    rescued_rows = [0, 1, GROUP, GROUP + 1]
    kept_rows = [2, 3, GROUP + 2, GROUP + 3]
    assert all(advantages[i] > 0.8 for i in rescued_rows)  # (1 - 0.5) / std([1,1,0,0]) = 0.866
    assert all(advantages[i] < -0.8 for i in kept_rows)
    metrics = result.metrics
    assert (metrics.groups, metrics.all_fail, metrics.rescued) == (3, 2, 2)
    assert metrics.rescued_zero_variance == 0 and metrics.rescued_rows == 4
    mean = sum(abs(advantages[i]) for i in rescued_rows) / 4
    assert metrics.rescued_mean_abs_advantage == pytest.approx(mean, rel=1e-5)
    assert metrics.as_dict()["harnessctl/rescue_rescued_zero_variance"] == 0


def test_the_metrics_advantage_is_verls_for_every_group_shape():
    groups = [[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0], [0.5, 0.2, 0.0], [1.0]]
    for rewards in groups:
        ours = group_advantages(rewards)
        theirs = verl_grpo([float(r) for r in rewards], ["g"] * len(rewards))
        assert ours == pytest.approx(theirs, abs=1e-5), rewards
    assert rescue_metrics(1, 0, []).rescued_mean_abs_advantage == 0.0


def test_the_mix_decides_which_rows_are_re_rolled_and_an_unknown_one_is_refused():
    assert MIXES == ("keep-failures", "replace")
    assert fresh_rows(4) == [0, 1] and fresh_rows(5) == [0, 1, 2]
    assert fresh_rows(1) == [0]  # nothing to keep beside a single row
    assert fresh_rows(4, "replace") == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="keep-failures, replace"):
        rescue_group(EverySiblingSucceeds(), "t", [{"success": False}] * 2, None, mix="half")
    one = rescue_group(EverySiblingSucceeds(), "t", [{"success": False}] * 3, None)
    assert one.replaced and one.rows == [0, 1] and one.group[2] == {"success": False}
    assert one.reason == "rescued: 2/2 succeeded, 1 base failure(s) kept"
