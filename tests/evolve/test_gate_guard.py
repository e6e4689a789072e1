"""The split guard (harnessctl/evolve/guard.py): its blocks reuse the gate's pairs, it holds
its level on a split of unequal tasks, stops trade-offs and passes real gains; in evolve, every
committed child passed it (issue #54)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from harnessctl.evolve.gate import GatePlan, run_gate
from harnessctl.evolve.guard import guard_blocks, run_guard


def test_a_block_is_every_task_of_the_split_at_the_gates_seeds_of_that_look():
    tasks = ["a", "b", "c", "d", "e"]
    seeds = list(range(100, 112))
    blocks = guard_blocks(tasks, seeds, per_look=2, looks=3)
    assert len(blocks) == 3
    assert blocks[0] == [(t, s) for s in (100, 101) for t in tasks]
    assert blocks[2] == [(t, s) for s in (104, 105) for t in tasks]
    # the gate's look 1 over the judged tasks b and d is inside the guard's block 1
    gate_pairs: list = []

    def observe(pairs):
        gate_pairs.extend(pairs)
        return {p: False for p in pairs}, {p: True for p in pairs}

    plan = GatePlan(max_looks=3, look_pairs=4)
    run_gate(["b", "d"], seeds, observe, level=0.01, alpha=0.1, plan=plan)
    assert set(gate_pairs[:4]) <= set(blocks[0])
    with pytest.raises(ValueError):
        guard_blocks(tasks, seeds[:3], per_look=2, looks=3)


def test_a_large_split_is_sampled_uniformly_each_task_at_fresh_seeds():
    tasks = [f"t{i}" for i in range(200)]
    blocks = guard_blocks(tasks, list(range(500)), per_look=1, looks=5, max_tasks=64, salt="s")
    assert [len(b) for b in blocks] == [64] * 5
    pairs = [p for b in blocks for p in b]
    assert len(set(pairs)) == len(pairs)  # a task drawn again gets its next seed
    counts = Counter(t for t, _ in pairs)
    assert all(sorted(s for t, s in pairs if t == task) == list(range(n))
               for task, n in counts.items())  # fmt: skip
    assert guard_blocks(tasks, list(range(500)), 1, 5, max_tasks=64, salt="s") == blocks
    assert guard_blocks(tasks, list(range(500)), 1, 5, max_tasks=64, salt="t") != blocks


def _world(gains: dict[str, float], base: dict[str, float], rng: random.Random):
    def observe(pairs):
        return (
            {p: rng.random() < base[p[0]] for p in pairs},
            {p: rng.random() < min(1.0, max(0.0, base[p[0]] + gains[p[0]])) for p in pairs},
        )

    return observe


def test_a_trade_off_passes_the_guard_within_its_level_and_a_real_gain_passes_it():
    rng = random.Random(3)
    base = {f"t{i}": 0.1 + 0.8 * i / 39 for i in range(40)}
    # +0.3 on the ten weakest tasks, -0.1 on the thirty others: no change on the split
    trade = {t: (0.3 if i < 10 else -0.1) for i, t in enumerate(base)}
    gain = {t: 0.15 for t in base}
    plan = GatePlan(max_looks=20)
    tasks = sorted(base)
    accepted = Counter()
    for _ in range(60):
        for name, gains in (("trade", trade), ("gain", gain)):
            blocks = guard_blocks(tasks, list(range(20)), 1, 20)
            looks = run_guard(blocks, _world(gains, base, rng), level=0.05, alpha=0.1, plan=plan)
            accepted[name] += looks[-1].decision == "accept"
    assert accepted["trade"] / 60 <= 0.05
    assert accepted["gain"] / 60 >= 0.8


def test_the_guard_holds_its_level_exactly_on_unequal_tasks():
    # two tasks, one block each look: the child always wins the first and always loses the
    # second when they differ (no better on the split); every path of 12 blocks, exactly
    from itertools import product

    from harnessctl.evolve.gate import e_value

    level, worst = 0.1, 0.0
    for a, b in ((0.5, 0.5), (0.9, 0.9), (0.3, 0.3)):  # P(win on t1), P(loss on t2)
        crossed = 0.0
        for path in product((0, 1), repeat=12):  # 6 blocks x (t1 discordant?, t2 discordant?)
            p, w, ls = 1.0, 0, 0
            hit = False
            for k in range(6):
                d1, d2 = path[2 * k], path[2 * k + 1]
                p *= (a if d1 else 1 - a) * (b if d2 else 1 - b)
                w, ls = w + d1, ls + d2
                hit = hit or e_value(w, ls) >= 1 / level
            crossed += p * hit
        worst = max(worst, crossed)
    assert worst <= level


@pytest.mark.slow
def test_every_child_evolve_commits_passed_the_split_guard(dbbench_world, tmp_path):
    from harnessctl.workspace import load_workspace

    store = load_workspace(dbbench_world.copy(tmp_path / "ws")).open_store()
    try:
        accepted = [e for e in store.edits() if e.accepted]
        assert accepted
        for edit in accepted:
            metrics = json.loads(edit.metrics_json)
            assert metrics["rule"]["guard"] is True
            guard = metrics["guard"]
            assert guard["decision"] == "accept" and guard["tasks"] == 40
            assert "split guard: better on the split" in (edit.reason or "")
            assert guard["looks"][-1]["wins"] > guard["looks"][-1]["losses"]
    finally:
        store.close()
