"""A rollout's wall-clock limit charges the harness only its own time: the seconds it waits
on the host (model calls, environment steps) move its deadline, up to ``max_wait_s``."""

from __future__ import annotations

import pytest

from harnessctl.harness import load_harness
from harnessctl.policy import Policy
from harnessctl.run.session import RolloutSession
from harnessctl.sandbox import Limits
from harnessctl.suite import load_suite
from tests.helpers import ROOT
from tests.helpers.openai_stub import Hang, OpenAIStub, Reply

SQL = "Action: Operation\n```sql\nSELECT COUNT(*) FROM `Game Schedule`\n```"
ANSWER = 'Action: Answer\nFinal Answer: ["1.0"]'


def rollout(stub, limits):
    suite = load_suite(ROOT / "examples" / "dbbench")
    task = suite.tasks("dev").by_id()["dev-004"]
    harness = load_harness(ROOT / "harnesses" / "dbbench-base")
    policy = Policy("openai/slow-model", {"api_base": stub.url, "api_key": "x"})
    with RolloutSession(suite.environment, sandbox="local", limits=limits) as session:
        return session.run(harness, task, 0, policy)


@pytest.mark.slow
@pytest.mark.parametrize("max_wait_s", [1800.0, 0.0])
def test_slow_model_calls_are_not_the_harness_s_time(max_wait_s):
    """Two calls of 2.5 s each against a 3 s limit: the harness's own time is well under it,
    so the rollout ends on its own; with ``max_wait_s=0`` (the old rule: every second
    counts) the same rollout times out."""
    with OpenAIStub() as stub:
        stub.push(Hang(2.5, Reply(SQL)), Hang(2.5, Reply(ANSWER)))
        rec = rollout(stub, Limits(timeout_s=3, max_wait_s=max_wait_s))
    waited = sum(c.latency_s for c in rec.trajectory.calls)
    if max_wait_s:
        assert rec.outcome.value != "timeout", rec.error
        assert len(rec.trajectory.calls) == 2 and waited >= 5
        assert rec.trajectory.sandbox.wall_s > 5 > 3  # longer than the limit, in model time
    else:
        assert rec.outcome.value == "timeout"
