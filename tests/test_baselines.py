"""Equal-budget baselines (harnessctl/baselines.py, `harnessctl bench`): every arm scored on
the same held-out pairs, verifier arms marked and bounded by their attempts, the router's
Rank-1 chosen without a verdict, task-level (clustered) tests against the best arm and the
base with Holm's adjustment over the arms."""

from __future__ import annotations

import pytest

from harnessctl.baselines import Outcome, compare_arms, task_level_p
from harnessctl.stats import holm, sign_flip_p
from tests.helpers.cli import cli_json

OK, NO = Outcome(True, 2, 10), Outcome(False, 3, 20)


def table_of(**solved: set[tuple[str, int]]) -> dict:
    pairs = [(t, s) for t in ("a", "b", "c", "d") for s in range(4)]
    return {name: {p: OK if p in wins else NO for p in pairs} for name, wins in solved.items()}


def test_arms_are_scored_on_the_same_pairs_and_verifier_arms_stop_at_a_success():
    pairs = [(t, s) for t in ("a", "b", "c", "d") for s in range(2)]
    table = table_of(
        base={("a", 0), ("a", 1)},
        s1={("a", 0), ("a", 1), ("b", 0), ("b", 1), ("d", 2)},
        s2={("c", 0), ("c", 1), ("c", 2), ("d", 2)},
    )
    ranking = {"a": ["s1", "s2"], "b": ["s1", "s2"], "c": ["s2", "s1"], "d": ["s2", "s1"]}
    arms, best = compare_arms(
        base="base", siblings=["s1", "s2"], extra=[], table=table, pairs=pairs, attempts=2,
        rollouts=2, evidence={"s1": 0.6, "s2": 0.4}, rank=ranking.__getitem__, salt="x",
    )  # fmt: skip
    by = {a.name: a for a in arms}
    assert best == "s1"
    assert by["base (base)"].successes == 2 and by["base (base)"].rollouts == 8
    assert by["router Rank-1, before any rollout"].successes == 6  # a, b via s1; c via s2
    assert by["best sibling by evidence (s1)"].successes == by["s1"].successes == 4
    # best-of-2 of s1: the second attempt, at seed + 2, solves (d, 0) through (d, 2)
    verified = by["verifier: best sibling best-of-2"]
    assert verified.verifier and verified.successes == 5
    assert 8 <= verified.rollouts <= 16
    assert by["verifier: router top-2"].successes == 7  # (d, 0): s2 fails, then s1 at (d, 2)
    assert not by["s1"].verifier
    assert arms[0].vs_best_p is None and arms[0].name.startswith("verifier: router top-2")
    assert all(a.vs_best_p is not None for a in arms[1:])
    assert by["base (base)"].vs_base_p is None
    assert all(a.model_calls == 2 * a.successes + 3 * (a.rollouts - a.successes) for a in arms)


def test_the_task_level_test_counts_a_tasks_seeds_as_one_cluster():
    # the README's combined arm against the base: 6 pairs won, from 5 tasks (one task twice)
    pairs = [(t, s) for t in "abcdefgh" for s in range(2)]
    won = {("a", 0), ("a", 1), ("b", 0), ("c", 1), ("d", 0), ("e", 1)}
    arm = {p: p in won for p in pairs}
    base = {p: False for p in pairs}
    assert task_level_p(pairs, arm, base) == pytest.approx(2 / 32)  # pair level: 2 / 64
    assert task_level_p(pairs, base, arm) == task_level_p(pairs, arm, base)
    assert sign_flip_p([]) == 1.0 and sign_flip_p([1, -1]) == 1.0
    assert sign_flip_p([2, 1]) == pytest.approx(0.5)  # +3 or -3 of four sign patterns
    assert holm([0.031, 0.5, None, 0.01]) == pytest.approx([0.062, 0.5, None, 0.03])


def test_every_arm_against_the_base_is_adjusted_for_the_number_of_arms():
    pairs = [(t, s) for t in ("a", "b", "c", "d") for s in range(2)]
    table = table_of(base=set(), s1={("a", 0), ("b", 0), ("c", 0), ("d", 0)}, s2={("a", 1)})
    arms, _ = compare_arms(
        base="base", siblings=["s1", "s2"], extra=[], table=table, pairs=pairs, attempts=1,
        rollouts=2, evidence={"s1": 0.6, "s2": 0.4}, rank=lambda t: ["s1", "s2"], salt="x",
    )  # fmt: skip
    by = {a.name: a for a in arms}
    assert by["s1"].vs_base_p == pytest.approx(2 / 16) and by["s1"].tasks == 4
    raw = [a.vs_base_p for a in arms]
    assert [a.vs_base_holm for a in arms] == pytest.approx(holm(raw))
    assert by["s1"].vs_base_holm > by["s1"].vs_base_p
    assert by["base (base)"].vs_base_holm is None


@pytest.mark.slow  # evaluates the siblings on the test split: ~500 rollouts
def test_bench_compares_the_evolved_siblings_with_baselines_on_held_out_tasks(
    dbbench_world, tmp_path
):
    ws = dbbench_world.copy(tmp_path / "ws")
    result = cli_json(ws, "bench", "dbbench-base", "--workers", "2")
    assert result["kind"] == "baselines" and result["heldout_split"] == "test"
    names = [a["name"] for a in result["arms"]]
    assert "base (dbbench-base)" in names and "router Rank-1, before any rollout" in names
    assert set(result["siblings"]) >= {v["name"] for v in dbbench_world.result["best"].values()}
    rates = [a["success_rate"] for a in result["arms"]]
    assert rates == sorted(rates, reverse=True) and result["best"] == names[0]
    for arm in result["arms"]:
        assert arm["pairs"] == result["pairs"] > 0
        limit = result["pairs"] * (result["attempts"] if arm["verifier"] else 1)
        assert result["pairs"] <= arm["rollouts"] <= limit
        assert arm["model_calls"] > 0
    # all repairs combined: built outside harnesses/, holding the siblings that merged
    combined = result["combined"]
    assert f"all repairs combined ({combined})" in names
    assert (ws / ".harnessctl" / "combined" / combined / "harness.py").is_file()
    assert not (ws / "harnesses" / combined).exists()
    held, left = result["combined_siblings"], result["combined_left_out"]
    assert held and set(held) | set(left) == set(result["siblings"])
