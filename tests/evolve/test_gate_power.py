"""What a budget buys (harnessctl/evolve/power.py): the exact power of a plan, the level kept
by both designs, the design with more power at small budgets, the smallest detectable effect
and evolve's budget statement (issue #54)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from harnessctl.evolve.gate import GatePlan, run_gate
from harnessctl.evolve.power import budget, judgement_power, plan_for, smallest_effect


@pytest.mark.parametrize("design", ["sequential", "fixed"])
def test_both_designs_keep_their_level(design):
    plan = GatePlan(max_looks=8, design=design)
    for p in (0.1, 0.5, 0.9):
        assert judgement_power(plan, 0.01, 0.1, 12, p, p).power <= 0.01


def test_the_exact_power_agrees_with_the_gate_run_on_draws():
    plan = GatePlan(max_looks=4, design="fixed")
    exact = judgement_power(plan, 0.05, 0.1, 12, 0.2, 0.5)
    rng = random.Random(11)
    hits, reps = 0, 1500
    for _ in range(reps):

        def observe(pairs):
            return (
                {q: rng.random() < 0.2 for q in pairs},
                {q: rng.random() < 0.5 for q in pairs},
            )

        looks = run_gate([f"t{i}" for i in range(12)], list(range(4)), observe, level=0.05,
                         alpha=0.1, plan=plan)  # fmt: skip
        hits += looks[-1].decision == "accept"
    assert abs(hits / reps - exact.power) < 4 * (exact.power * (1 - exact.power) / reps) ** 0.5


def test_below_the_threshold_the_fixed_design_has_more_power():
    for looks in (2, 4, 8):
        seq = judgement_power(GatePlan(max_looks=looks), 0.01, 0.1, 12, 0.2, 0.35)
        fixed = judgement_power(GatePlan(max_looks=looks, design="fixed"), 0.01, 0.1, 12, 0.2, 0.35)
        assert fixed.power > seq.power
        assert plan_for(looks).design == "fixed"
    assert plan_for(30).design == "sequential" and plan_for(4, design="sequential").design == (
        "sequential"
    )
    with pytest.raises(ValueError):
        plan_for(4, design="bayes")


def test_the_smallest_detectable_effect_and_the_budget_statement():
    plan = plan_for(20)
    d, found = smallest_effect(plan, 0.01, 0.1, 12, 0.2)
    assert d is not None and 0.05 <= d <= 0.25 and found is not None and found.power >= 0.8
    smaller = smallest_effect(replace(plan, max_looks=8), 0.01, 0.1, 12, 0.2)[0]
    assert smaller is not None and smaller > d  # fewer looks: only larger effects
    said = budget(plan, judgements=10, level=0.01, alpha=0.1, tasks=12, parent_success=0.2,
                  guard_tasks=40, split_success=0.3)  # fmt: skip
    assert said.detectable == d and said.max_pairs == 240
    text = said.text()
    assert f"detects +{d * 100:.0f} points on the judged tasks with power 0.8" in text
    assert "split guard (40 tasks a look) detects +" in text
    # two looks of 12 pairs at level 0.01: only very large repairs are found
    small = budget(plan_for(2), judgements=10, level=0.01, alpha=0.1, tasks=12,
                   parent_success=0.2)  # fmt: skip
    assert small.design == "fixed" and small.detectable is not None and small.detectable > 0.2
    assert small.warning and "raise --max-looks" in small.warning
    # one pair a look, one look: nothing can be detected at level 0.001
    none = budget(GatePlan(max_looks=1, look_pairs=1), judgements=1, level=0.001, alpha=0.1,
                  tasks=1, parent_success=0.5)  # fmt: skip
    assert none.detectable is None and "detects no gain" in (none.warning or "")


def test_the_budget_benchmark_fails_a_threshold_that_picks_the_costlier_design():
    import subprocess
    import sys

    from tests.helpers import ROOT

    script = str(ROOT / "benchmarks" / "gate_budget.py")

    def run(*args):
        return subprocess.run([sys.executable, script, "--p0", "0.2", *args],
                              capture_output=True, text=True, timeout=300, check=False)  # fmt: skip

    ok = run("--looks", "4,20")
    assert ok.returncode == 0 and "passed" in ok.stdout, ok.stdout
    # a repair so large that the sequential test stops early even on 48 pairs: the fixed
    # design the threshold picks there is the costlier one, and the benchmark says so
    bad = run("--looks", "4", "--effect", "0.5")
    assert bad.returncode == 1
    assert "FAILED 48 pairs: fixed chosen, sequential costs fewer pairs per repair" in bad.stdout
