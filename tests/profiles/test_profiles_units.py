"""Profile building, behavior cards, YAML stability, profile history in a real SQLite store,
the re-anchoring sample and the drift interval: pure parts, no sandbox."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import yaml

from harnessctl.profiles.build import build_profile, rescue_matrix
from harnessctl.profiles.card import behavior_card
from harnessctl.profiles.files import read_profile, write_profile
from harnessctl.profiles.reanchor import newcombe, stratified_sample
from harnessctl.records import (
    Card,
    HarnessRef,
    Profile,
    ProfileHarness,
    ProfilePolicy,
    RescueCell,
    RescuedTask,
    SuiteRef,
)
from harnessctl.store import ProfileRow, Store

BASE = HarnessRef(name="base", hash="b" * 64)
POLICY = ProfilePolicy(id="sim/dbbench", model="sim/dbbench")
SUITE = SuiteRef(name="dbbench-dev", id="dbbench-dev@x")


def row(task, seed, outcome, category="INSERT", tokens=100):
    return SimpleNamespace(
        task_id=task,
        seed=seed,
        outcome=outcome,
        success=outcome == "success",
        category=category,
        steps=2,
        prompt_tokens=tokens,
        completion_tokens=10,
        cost_usd=0.0,
        latency_s=0.01,
    )


# base: t1 fails twice (invalid_format), t2 fails twice (tool_error), t3 always succeeds
BASE_ROWS = [
    row("t1", 0, "invalid_format"),
    row("t1", 1, "invalid_format"),
    row("t2", 0, "tool_error", "counting"),
    row("t2", 1, "tool_error", "counting"),
    row("t3", 0, "success"),
    row("t3", 1, "success"),
]


def profile(name, rows) -> Profile:
    return build_profile(
        rows,
        BASE_ROWS,
        harness=ProfileHarness(name=name, hash=name[0] * 64),
        base=BASE,
        policy=POLICY,
        suite=SUITE,
        split="train",
    )


def test_rescue_set_evidence_and_card() -> None:
    fmt = profile(
        "fmt",
        [
            row("t1", 0, "success"),
            row("t1", 1, "invalid_format"),
            row("t2", 0, "tool_error", "counting"),
            row("t2", 1, "tool_error", "counting"),
            row("t3", 0, "success", tokens=300),
            row("t3", 1, "wrong_answer", tokens=300),
        ],
    )
    assert fmt.rescue.opportunities == 2
    assert fmt.rescue.tasks == [
        RescuedTask(task="t1", category="INSERT", successes=1, rollouts=2, rate=0.5)
    ]
    ev = fmt.rescue.evidence
    assert ev is not None and ev.by_outcome == {
        "invalid_format": RescueCell(rescued=1, of=2),
        "tool_error": RescueCell(rescued=0, of=2),
    }
    assert fmt.regressed_tasks == ["t3"]
    base = profile("base", BASE_ROWS)  # its hash is BASE's
    assert base.is_base and base.rescue.evidence is None
    card = behavior_card(fmt, base)
    assert card.fixes == ["invalid_format 2 -> 1"]
    assert "rescues 1 of 2 all-fail tasks (INSERT 1)" in card.rescues
    assert len(card.regresses) == 1  # INSERT stays at 50%: only the task regression
    assert any("t3" in r for r in card.regresses)
    assert "+" in card.costs[0]  # more tokens than the base
    assert behavior_card(base, base).summary == "base harness: 33.3% success"


def test_matrix_shows_overlap_unique_and_union() -> None:
    a = profile("aaa", [row("t1", 0, "success"), row("t2", 0, "success", "counting")])
    c = profile("ccc", [row("t2", 1, "success", "counting")])
    m = rescue_matrix([a, c])
    assert m.overlap["aaa"]["ccc"] == 1
    assert m.unique == {"aaa": ["t1"], "ccc": []}
    assert m.union_size == 2 and m.largest_single == 2


def test_yaml_is_stable_sorted_and_rounded(tmp_path: Path) -> None:
    p = profile("fmt", [row("t1", 0, "success"), row("t1", 1, "wrong_answer")])
    p.card = Card(summary="x")
    path = write_profile(tmp_path, p)
    assert path == tmp_path / "fmt" / "sim-dbbench" / "dbbench-dev.train.yaml"
    first = path.read_bytes()
    write_profile(tmp_path, Profile.load(dict(reversed(list(p.dump().items())))))
    assert path.read_bytes() == first
    text = first.decode()
    keys = [line.split(":")[0] for line in text.splitlines() if line and line[0].isalpha()]
    assert keys == sorted(keys)
    assert "reanchor" not in keys  # a full profile has no re-anchoring sample
    assert yaml.safe_load(text)["success"]["ci95"] == [round(x, 4) for x in p.success.ci95]
    assert read_profile(path) == p


def test_profile_history_is_kept_per_key(tmp_path: Path) -> None:
    with Store.for_workspace(tmp_path) as store:
        for i, policy in enumerate(["sim/dbbench", "sim/dbbench", "sim/dbbench#abc"]):
            store.record_profile(
                ProfileRow(
                    harness_hash="h" * 64,
                    harness_name="fmt",
                    policy_id=policy,
                    suite="s",
                    split="train",
                    data_json=f'{{"n": {i}}}',
                    created_at=float(i),
                )
            )
        current = store.profiles(harness_hash="h" * 64)
        assert sorted((r.policy_id, r.data_json) for r in current) == [
            ("sim/dbbench", '{"n": 1}'),
            ("sim/dbbench#abc", '{"n": 2}'),
        ]
        history = store.profiles(policy_id="sim/dbbench", current=None)
        assert [(r.data_json, r.current) for r in history] == [
            ('{"n": 0}', False),
            ('{"n": 1}', True),
        ]


def test_stratified_sample_is_seeded_and_covers_categories() -> None:
    tasks = [
        SimpleNamespace(id=f"t{i:02d}", category="ab"[i % 2] if i < 10 else "c") for i in range(12)
    ]
    one = stratified_sample(tasks, 2, seed=0)
    assert one == stratified_sample(tasks, 2, seed=0)
    assert len(one) == 6
    assert {t.category for t in tasks if t.id in one} == {"a", "b", "c"}
    assert stratified_sample(tasks, 2, seed=1) != one or len(set(one)) == 6


def test_newcombe_interval() -> None:
    d, lo, hi = newcombe(30, 40, 10, 40)
    assert d == 0.5 and 0 < lo < d < hi < 1
    d, lo, hi = newcombe(10, 20, 10, 20)
    assert d == 0 and lo < 0 < hi
