"""tau2's slow loading steps are named (issue #56): importing its package took 33-43 s on a
busy machine before any output; the status line now says what is loading."""

from __future__ import annotations

import pytest

from harnessctl.phases import listening

pytest.importorskip("tau2")


def test_importing_tau2_and_loading_its_tasks_are_named_steps():
    from harnessctl.envs.tau2 import package

    seen: list[tuple[str, ...]] = []
    package.tau2.cache_clear()  # imported already by another test: name the step again
    package.domain_tasks.cache_clear()
    package.public_material.cache_clear()
    with listening(seen.append):
        package.tau2()
        package.domain_tasks("airline", "test")
        package.public_material("retail")
    steps = [stack[-1] for stack in seen if stack]
    assert steps == [
        "importing tau2-bench's package (tau2 and litellm: seconds)",
        "loading tau2's airline tasks (split test)",
        "building tau2's retail environment (its database, tools and policy)",
    ]
    assert seen[-1] == ()  # every step ended
    with listening(seen.append):  # cached: nothing loads, nothing is said
        before = len(seen)
        package.domain_tasks("airline", "test")
    assert len(seen) == before
