"""Fixtures of the store tests: one read-through cache, six DBBench rollouts run once per
session (every test process reads the same directory and copies it before changing it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from harnessctl.harness import load_harness
from harnessctl.policy import Policy
from harnessctl.run.evaluate import EvalRequest, evaluate
from harnessctl.store import Store
from harnessctl.suite import load_suite
from tests.helpers import BASE_HARNESS, EXAMPLE_SUITE
from tests.helpers.worlds import once_per_session

TASKS = ["dev-000", "dev-020", "dev-045"]


def _request(**kw) -> EvalRequest:
    defaults = dict(
        harness=load_harness(BASE_HARNESS),
        suite=load_suite(EXAMPLE_SUITE),
        split="dev",
        policy=Policy("sim/dbbench"),
        rollouts=2,
        workers=2,
        task_ids=TASKS,
    )
    return EvalRequest(**{**defaults, **kw})


@pytest.fixture(scope="session")
def eval_request() -> Callable[..., EvalRequest]:
    """The cache's evaluation (three dev tasks, two seeds, the DBBench sim), any field
    overridden."""
    return _request


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    """A store directory holding the six rollouts of ``eval_request()``: read it, or copy it
    before changing it."""

    def make(state: Path) -> dict:
        with Store(f"sqlite:///{state / 'store.db'}", state / "trajectories") as store:
            assert evaluate(_request(), store).executed == 6
        return {"state": str(state)}

    return Path(once_per_session(tmp_path_factory, "readthrough-cache", make)["state"])
