"""The ``harnessctl test`` loop: re-evaluate each harness on its baseline's split and seeds
and compare (see the package docstring), or re-profile and rewrite the baselines.

A test is one run (issue #56): each harness's evaluation is a run under it (``parent_id``),
as a profile's and a bench's are (:mod:`harnessctl.run.group`), so ``harnessctl runs`` lists
one row per test and ``harnessctl show RUN`` its evaluations. The test's own figures are its
first harness's evaluation."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..harness import HarnessSpec, load_harness
from ..run.evaluate import EvalRequest, Progress, evaluate
from ..run.group import run_group
from ..workspace import Workspace
from . import Check, baseline_path, compare, load_baseline

REGRESS_RESULT_VERSION = 3  # 2: errors (harnesses not checked); 3: run_id


@dataclass(frozen=True)
class Thresholds:
    """When a check fails (see the package docstring)."""

    min_drop: float = 0.05
    """Overall drop (significant, and at least this) that fails ``overall``."""
    category_min_drop: float = 0.15
    """Per-category drop that fails ``category:<name>``."""
    fail_on_flips: bool = False
    """Whether tasks that flipped from always-success to never fail ``flips``."""


class RegressResult(BaseModel):
    """Every check of every harness; ``harnessctl test --json`` prints it."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["test"] = "test"
    version: int = REGRESS_RESULT_VERSION
    checks: list[Check] = Field(default_factory=list)
    errors: dict[str, str] = Field(default_factory=dict)
    """Harness -> why it could not be checked (rollouts failed on infrastructure after
    retries): no conclusion either way; the command exits 3."""
    run_id: str | None = None
    """The test's run (``harnessctl show RUN`` lists each harness's evaluation under it)."""

    @property
    def infra_failed(self) -> bool:
        return bool(self.errors)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


def baselined(ws: Workspace, root: Path) -> list[HarnessSpec]:
    """Every workspace harness with a baseline directory under ``root``."""
    return [load_harness(path) for path in ws.harness_dirs() if (root / path.name).is_dir()]


def update_baselines(
    specs: list[HarnessSpec],
    template: EvalRequest,
    store,
    ws: Workspace,
    root: Path,
    progress: Progress | None = None,
) -> list[Path]:
    """Re-profile ``specs`` (rescues against their lineage root) and write the baselines."""
    from ..harness import lineage_root
    from ..profiles.runner import profile_pool

    base = lineage_root(specs[0], ws.harnesses_dir)
    return profile_pool(specs, base, template, store, out_dir=root, progress=progress).paths


def run_regression(
    specs: list[HarnessSpec],
    template: EvalRequest,
    store,
    root: Path,
    thresholds: Thresholds = Thresholds(),
    *,
    split: str | None = None,
    seed_offset: int = 0,
    progress: Progress | None = None,
) -> RegressResult:
    """Check each harness against its baseline under ``root`` for the template's policy and
    suite (``split`` picks among several baselines), on the baseline's own split and seeds
    shifted by ``seed_offset``."""
    policy_id, suite = template.policy.id, template.suite.name
    # every baseline read before any rollout: a malformed one stops the test at once
    baselines = [
        (spec, load_baseline(baseline_path(root, spec.name, policy_id, suite, split)))
        for spec in specs
    ]
    result = RegressResult()
    first = replace(template, split=baselines[0][1].split)
    with run_group(store, first, "test", specs[0]) as group:
        result.run_id = group.id
        for spec, baseline in baselines:
            seeds = sorted(baseline.seeds)
            request = replace(
                template,
                harness=spec,
                split=baseline.split,
                rollouts=len(seeds),
                seed=seeds[0] + seed_offset,
            )
            evaluated = evaluate(group.child(request), store, progress)
            if evaluated.infra_failed:
                result.errors[spec.name] = (
                    f"{len(evaluated.infra_failed)} rollout(s) failed on infrastructure after "
                    "retries: not checked"
                )
                continue
            if spec is specs[0]:
                group.stand_on(evaluated.rows)
            result.checks += compare(
                spec.name,
                baseline,
                evaluated.rows,
                min_drop=thresholds.min_drop,
                category_min_drop=thresholds.category_min_drop,
                fail_on_flips=thresholds.fail_on_flips,
            )
    return result
