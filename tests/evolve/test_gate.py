"""The acceptance gate's arithmetic: an anytime-valid e-value, error control over a run,
the sequential looks and the choice of judged tasks (harnessctl/evolve/gate.py)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from harnessctl.evolve.gate import (
    FIXED_BELOW_PAIRS,
    ErrorControl,
    GatePlan,
    choose_design,
    decide,
    e_value,
    run_gate,
    select_tasks,
    sign_p,
)


def crossing_probability(level: float, steps: int) -> float:
    """P(the e-value ever reaches 1/level within ``steps`` discordant pairs) when each is a
    fair coin: exact, over every path (paths that cross are absorbed)."""
    alive = {(0, 0): 1.0}
    crossed = 0.0
    for _ in range(steps):
        nxt: dict[tuple[int, int], float] = {}
        for (w, ls), p in alive.items():
            for step in ((w + 1, ls), (w, ls + 1)):
                if e_value(*step) >= 1 / level:
                    crossed += p / 2
                else:
                    nxt[step] = nxt.get(step, 0.0) + p / 2
        alive = nxt
    return crossed


@pytest.mark.parametrize("level", [0.1, 0.05, 0.01])
def test_the_e_value_holds_its_level_at_every_look(level):
    # Ville's inequality: looking after every pair, for 120 pairs, stays within the level
    assert crossing_probability(level, 120) <= level


def test_the_e_value_grows_with_wins_and_shrinks_with_losses():
    assert e_value(0, 0) == pytest.approx(1.0)
    assert e_value(10, 0) > e_value(9, 0) > e_value(9, 1) > 1
    assert e_value(0, 10) < 0.5
    assert e_value(600, 400) > 1e6  # large counts stay finite
    with pytest.raises(ValueError):
        e_value(-1, 0)


def test_error_control_shares_alpha_over_the_run():
    assert ErrorControl("fwer", 0.1, 10).level(3) == pytest.approx(0.01)
    fdr = ErrorControl("fdr", 0.1, 10)
    assert [fdr.level(k) for k in (0, 1, 4)] == pytest.approx([0.01, 0.02, 0.05])
    assert fdr.level(20) == pytest.approx(0.1)  # never above alpha
    assert ErrorControl("none", 0.1, 10).level(0) == pytest.approx(0.1)
    assert "false discovery rate <= 0.1 over 10 judgements" in fdr.describe()
    assert "family-wise error <= 0.1" in ErrorControl("fwer", 0.1, 10).describe()
    for bad in (("both", 0.1, 1), ("fdr", 0.0, 1), ("fdr", 0.1, 0)):
        with pytest.raises(ValueError):
            ErrorControl(*bad)  # type: ignore[arg-type]


def test_decide_accepts_clear_wins_stops_clear_losses_and_ties():
    plan = GatePlan(max_looks=10, min_looks=2)
    assert decide(12, 0, 1, 0.01, 0.1, plan)[1] == "accept"
    assert decide(2, 0, 1, 0.01, 0.1, plan)[1] == "continue"
    assert decide(0, 9, 1, 0.01, 0.1, plan)[1] == "worse"
    assert decide(0, 0, 2, 0.01, 0.1, plan)[1] == "futile"  # nothing changed: stop
    assert decide(0, 0, 1, 0.01, 0.1, plan)[1] == "continue"
    assert decide(3, 3, 2, 0.01, 0.1, GatePlan(min_looks=4))[1] == "continue"  # it has wins
    assert decide(3, 3, 4, 0.01, 0.1, GatePlan(min_looks=4))[1] == "futile"
    assert decide(3, 1, 10, 0.01, 0.1, plan)[1] == "exhausted"
    # min_net: evidence alone does not accept an edit short of the net asked for
    assert decide(12, 0, 1, 0.01, 0.1, GatePlan(min_net=20))[1] == "continue"


def test_run_gate_looks_seed_by_seed_until_it_decides():
    seen: list[list[tuple[str, int]]] = []

    def observe(pairs):
        seen.append(pairs)
        return {p: False for p in pairs}, {p: True for p in pairs}  # the child wins all

    plan = GatePlan(max_looks=5, look_pairs=4)
    looks = run_gate(["a", "b"], list(range(100, 110)), observe, level=0.01, alpha=0.1, plan=plan)
    assert seen[0] == [("a", 100), ("b", 100), ("a", 101), ("b", 101)]  # 2 seeds per look
    assert looks[-1].decision == "accept" and looks[-1].look == len(seen) < 5
    assert looks[-1].wins == looks[-1].pairs and looks[-1].losses == 0
    with pytest.raises(ValueError):
        run_gate(["a", "b"], [1, 2], observe, level=0.01, alpha=0.1, plan=plan)


def test_an_edit_that_changes_nothing_stops_early_as_futile():
    def observe(pairs):
        same = {p: p[1] % 2 == 0 for p in pairs}
        return same, dict(same)

    plan = GatePlan(max_looks=30, min_looks=4)
    looks = run_gate(["a"] * 3, list(range(400)), observe, level=0.01, alpha=0.1, plan=plan)
    assert looks[-1].decision == "futile" and looks[-1].look == 2  # two looks, no win


@dataclass
class R:
    task_id: str
    success: bool
    outcome: str


def test_judged_tasks_are_the_parents_worst_targeted_failures_then_successes():
    rows = [R("always", False, "x"), R("always", False, "x")]
    rows += [R("half", False, "x"), R("half", True, "success")]
    rows += [R("other", False, "y"), R("other", False, "y")]  # not targeted
    rows += [R(f"ok{i}", True, "success") for i in range(5)]
    batch, control = select_tasks(rows, ["x"], batch=5, control=3, salt="s")
    assert batch == ["always", "half"]
    assert len(control) == 3 and set(control) <= {f"ok{i}" for i in range(5)}
    assert select_tasks(rows, ["x"], 1, 0, "s") == (["always"], [])
    salts = {tuple(select_tasks(rows, ["x"], 5, 3, f"salt{i}")[1]) for i in range(8)}
    assert len(salts) > 1  # the successes' order is seeded: directions judge different ones


def test_null_edits_are_accepted_within_the_level_on_a_sampled_world():
    # a world of 20 tasks at varied success rates, parent and child drawn alike: the
    # gate's false acceptances stay within its level (a quick, seeded Monte Carlo)
    rng = random.Random(7)
    p = {f"t{i}": i / 20 for i in range(20)}
    accepted = 0
    for _ in range(300):
        tasks = rng.sample(sorted(p), 12)

        def observe(pairs):
            return (
                {q: rng.random() < p[q[0]] for q in pairs},
                {q: rng.random() < p[q[0]] for q in pairs},
            )

        plan = GatePlan()
        looks = run_gate(
            tasks, list(range(plan.seeds_needed(12))), observe, level=0.05, alpha=0.1, plan=plan
        )
        accepted += looks[-1].decision == "accept"
    assert accepted / 300 <= 0.05


def test_the_sign_test_is_exact_and_the_budget_chooses_the_design():
    assert sign_p(5, 0) == pytest.approx(1 / 32)
    assert sign_p(0, 0) == 1.0 and sign_p(0, 3) == 1.0
    assert sign_p(6, 2) == pytest.approx(37 / 256)
    assert choose_design(24) == "fixed" and choose_design(168) == "fixed"
    assert choose_design(FIXED_BELOW_PAIRS) == "sequential" and choose_design(360) == "sequential"


def test_the_fixed_design_tests_once_at_its_last_look_and_curtails_lost_causes():
    plan = GatePlan(max_looks=4, design="fixed")
    # a clear win before the last look is not accepted early: the test is fixed-sample
    assert decide(12, 0, 1, 0.01, 0.1, plan, pairs_left=36)[1] == "continue"
    assert decide(8, 0, 4, 0.01, 0.1, plan)[1] == "accept"  # p = 1/256
    assert decide(8, 3, 4, 0.01, 0.1, plan)[1] == "exhausted"  # p = 0.11
    # curtailment: 2 more pairs, both wins, could not bring 0-3 to p <= 0.01; 12 could
    assert decide(0, 3, 3, 0.01, 0.1, plan, pairs_left=2)[1] == "futile"
    assert decide(0, 2, 3, 0.01, 0.1, plan, pairs_left=12)[1] == "continue"
    assert decide(0, 12, 2, 0.01, 0.1, plan, pairs_left=24)[1] == "worse"

    def observe(pairs):
        return {p: False for p in pairs}, {p: p[1] % 2 == 0 for p in pairs}

    looks = run_gate(["a", "b", "c"], list(range(20)), observe, level=0.01, alpha=0.1, plan=plan)
    assert [k.decision for k in looks] == ["continue"] * 3 + ["accept"]
    assert looks[-1].p_value == pytest.approx(sign_p(looks[-1].wins, 0))
    assert all(k.p_value is not None for k in looks)


def test_a_runs_share_of_a_workspace_budget_scales_its_levels():
    shared = ErrorControl("fdr", 0.1, 10, weight=0.5)
    assert shared.level(0) == pytest.approx(0.005) and shared.level(3) == pytest.approx(0.02)
    assert ErrorControl("fwer", 0.1, 10, weight=0.25).level(5) == pytest.approx(0.0025)
    assert ErrorControl("none", 0.1, 10, weight=0.5).level(0) == pytest.approx(0.1)
    assert "this run's share 0.5" in shared.describe()
    with pytest.raises(ValueError):
        ErrorControl("fdr", 0.1, 10, weight=0.0)
