"""`harnessctl runs` and `harnessctl compare`: real evals (sandboxed subprocesses, the
offline sim policy, the SQLite store), then the listing and the paired comparison checked
against the stored rows; exact figures on a hand-built store."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harnessctl.cli import app
from harnessctl.compare import CompareResult, compare_runs
from harnessctl.evolve.reward import sign_test
from harnessctl.runs import RunsResult, list_runs
from harnessctl.store import RunRow, Store
from harnessctl.workspace import load_workspace
from tests.helpers.cli import TASKS, make_variant, task_flags
from tests.helpers.stores import make_rollout

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def json_of(*args, code: int = 0):
    result = invoke(*args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_runs_and_compare_on_real_evals(workspace):
    make_variant(
        workspace, "crashy", "return messages + self.history(state)", "raise RuntimeError('x')"
    )
    base = json_of("eval", "dbbench-base", "--rollouts", 2, *task_flags(TASKS[:4]))
    # every rollout harness_error: the eval says so and exits 1, its run is still recorded
    crashy = json_of("eval", "crashy", "--rollouts", 2, *task_flags(TASKS[:4]), code=1)
    again = json_of("eval", "dbbench-base", "--rollouts", 2, *task_flags(TASKS[:4]))
    assert again["cached"] == 8

    listed = json_of("runs")
    assert listed["kind"] == "runs" and listed["version"] == 3
    assert RunsResult.model_validate(listed).model_dump(mode="json") == listed
    assert [r["id"] for r in listed["runs"]] == [again["run_id"], crashy["run_id"], base["run_id"]]
    first = listed["runs"][2]
    assert first["harness"] == "dbbench-base" and first["status"] == "done"
    assert first["split"] == "dev" and first["policy"] == base["policy"]
    assert first["rollouts"] == 8 and first["successes"] == base["summary"]["successes"]

    out = json_of("compare", base["run_id"][:8], crashy["run_id"])
    assert out["kind"] == "compare" and out["pairs"] == 8 and out["same_selection"]
    assert CompareResult.model_validate(out).model_dump(mode="json") == out
    wins = base["summary"]["successes"]
    assert wins > 0
    assert out["regressions"] == wins and out["rescues"] == 0
    assert out["p_b_better"] == 1.0 and out["p_two_sided"] == min(1.0, 2 * sign_test(wins, 0))
    assert out["b_usage"]["success_rate"] == 0.0
    assert out["a_usage"]["prompt_tokens"] == base["summary"]["prompt_tokens"]
    assert sum(out["outcome_changes"].values()) == len(out["changes"])
    assert all(c["b_outcome"] == "harness_error" for c in out["changes"])
    store = load_workspace(workspace).open_store()
    for change in out["changes"]:
        a, b = store.rollout(change["a_rollout"]), store.rollout(change["b_rollout"])
        assert (a.task_id, a.seed) == (b.task_id, b.seed) == (change["task"], change["seed"])
    # a run served wholly from the cache stands on the same rollouts: nothing changes
    same = json_of("compare", base["run_id"], again["run_id"])
    assert same["pairs"] == 8 and same["changes"] == [] and same["delta"] == 0.0
    # harness names stand for their latest runs on the selection
    named = json_of("compare", "dbbench-base", "crashy", "--split", "dev")
    assert named["a"]["id"] == again["run_id"] and named["b"]["id"] == crashy["run_id"]
    table = invoke("compare", "dbbench-base", "crashy")
    assert table.exit_code == 0
    assert f"regressions {wins}" in table.stdout and "harness_error" in table.stdout
    assert "crashy" in invoke("runs").stdout


def test_compare_figures_on_a_hand_built_store(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}", tmp_path / "traj")
    for run_id, harness in (("runA0000", "ha"), ("runB0000", "hb")):
        store.start_run(
            RunRow(
                id=run_id,
                command="eval",
                harness_hash=harness,
                suite="s",
                split="dev",
                policy_id="sim/dbbench",
            )
        )
    # (task, category, A success, B success)
    cases = [
        ("t1", "x", True, True),
        ("t2", "x", False, True),
        ("t3", "y", False, True),
        ("t4", "y", True, False),
        ("t5", "y", False, False),
    ]
    for task, cat, ok_a, ok_b in cases:
        for harness, ok in (("ha", ok_a), ("hb", ok_b)):
            outcome = "success" if ok else ("wrong_answer" if harness == "ha" else "step_limit")
            store.record_rollout(
                make_rollout(
                    f"{harness}-{task}",
                    run_id="run" + harness[1].upper() + "0000",
                    harness_hash=harness,
                    task_id=task,
                    seed=0,
                    suite="s",
                    split="dev",
                    category=cat,
                    outcome=outcome,
                    success=ok,
                    cost_usd=0.5 if ok else 0.25,
                ),
                [],
                {"kind": "trajectory"},
            )
    store.record_rollout(
        make_rollout(
            "ha-extra",
            run_id="runA0000",
            harness_hash="ha",
            task_id="t9",
            seed=0,
            suite="s",
            split="dev",
        ),
        [],
        {},
    )
    for run_id in ("runA0000", "runB0000"):  # each run's membership: what it executed
        store.finish_run(run_id, "done", None, store.rollouts(run_id=run_id))
    out = compare_runs(store, store.run("runA0000"), store.run("runB0000"), (None, None))
    assert (out.pairs, out.only_a, out.only_b) == (5, 1, 0)
    assert (out.rescues, out.regressions) == (2, 1)
    assert out.p_b_better == sign_test(2, 1) == 0.5
    # one seed per task: each task its own cluster; nets +1, +1, -1 (every sign pattern is
    # at least as far from zero as the observed +1)
    assert out.tasks == 5 and out.p_two_sided_tasks == 1.0
    assert out.delta == (3 - 2) / 5
    assert out.outcome_changes == {
        "success -> step_limit": 1,
        "wrong_answer -> step_limit": 1,
        "wrong_answer -> success": 2,
    }
    y, x = out.categories["y"], out.categories["x"]
    assert (y.pairs, y.delta, y.rescues, y.regressions) == (3, 0.0, 1, 1)
    assert (x.pairs, x.a_successes, x.b_successes, x.delta, x.rescues) == (2, 1, 2, 0.5, 1)
    assert [c.change for c in out.changes] == ["rescue", "rescue", "regression", "outcome"]
    assert out.a_usage.cost_usd == 0.5 * 2 + 0.25 * 3
    assert [r.id for r in list_runs(store).runs] == ["runB0000", "runA0000"]


@pytest.mark.slow
def test_a_runs_figures_never_change_afterwards(workspace):
    """The sequence that used to move a run's numbers: a run, then more rollouts of the same
    harness, policy and split (another eval at more seeds; an evolve's re-tests do the same).
    Every command still reports the first run as its own eval did."""
    first = json_of("eval", "dbbench-base", "--rollouts", 2, *task_flags(TASKS[:4]))
    more = json_of("eval", "dbbench-base", "--rollouts", 4, *task_flags(TASKS[:4]))
    assert more["cached"] == 8 and more["summary"]["rollouts"] == 16
    rate = first["summary"]["success_rate"]
    listed = {r["id"]: r for r in json_of("runs")["runs"]}
    assert listed[first["run_id"]]["rollouts"] == 8
    assert listed[first["run_id"]]["success_rate"] == rate
    out = json_of("compare", first["run_id"], more["run_id"])
    assert (out["pairs"], out["only_a"], out["only_b"]) == (8, 0, 8)
    assert out["a_usage"]["success_rate"] == rate
    traces = json_of(
        "export-traces", "--format", "otel", "--run", first["run_id"], "--out", workspace / "t"
    )
    assert traces["rollouts"] == 8
    store = load_workspace(workspace).open_store()
    assert {(r.task_id, r.seed) for r in store.members(first["run_id"])} == {
        (t, s) for t in TASKS[:4] for s in (0, 1)
    }
    # the report shows a harness as its newest run reports it (here a cached rerun of the
    # first selection: 8 rollouts, not the 16 stored)
    from harnessctl.report.data import ALL, collect

    again = json_of("eval", "dbbench-base", "--rollouts", 2, *task_flags(TASKS[:4]))
    data = collect(store, workspace / "harnesses", first["policy"], split="dev")
    (base_hash,) = {h for _, h in data.harnesses}
    cell = data.heat[(base_hash, ALL)]
    assert cell.attempts == 8 and cell.successes == again["summary"]["successes"]


def test_runs_made_by_another_are_folded_under_it(tmp_path):
    """A run an evolve made (``parent_id``) is listed under it, not beside it, and a harness
    name never stands for it in `compare`."""
    from harnessctl.runs import latest_run

    store = Store(f"sqlite:///{tmp_path / 's.db'}", tmp_path / "traj")
    store.start_run(RunRow(id="evolve01", command="evolve", harness_hash="ha", split="dev"))
    store.start_run(
        RunRow(id="judge001", command="evolve-judge", harness_hash="ha", split="dev",
               parent_id="evolve01", started_at=2e9)
    )  # fmt: skip
    store.finish_run("judge001", "done", None)
    store.finish_run("evolve01", "done", None)
    from harnessctl.store import HarnessRow

    store.upsert_harness(HarnessRow(hash="ha", name="base", path="x", manifest_json="{}"))
    top = list_runs(store).runs
    assert [(r.id, r.children) for r in top] == [("evolve01", 1)]
    every = list_runs(store, everything=True).runs
    assert [(r.id, r.parent_id) for r in every] == [("judge001", "evolve01"), ("evolve01", None)]
    assert latest_run(store, "base").id == "evolve01"  # the newer child is not "the" run
    assert [r.id for r in list_runs(store, everything=True, command="evolve").runs] == ["evolve01"]


def test_bad_references_exit_nonzero_naming_them(workspace):
    bad = invoke("runs", "--status", "bogus")
    assert bad.exit_code == 2 and "--status" in bad.output
    missing = invoke("compare", "abcd1234", "dbbench-base")
    assert missing.exit_code != 0 and "abcd1234" in missing.output


@pytest.mark.slow
def test_a_profile_is_one_run_with_its_evaluations_folded_under_it(workspace):
    """Issue #41: `profile` of two harnesses is one run in `runs` (the base's figures) with
    each harness's evaluation under it; a harness name in `compare` still finds those."""
    six = workspace / "examples" / "dbbench-six"
    six.mkdir()
    lines = (workspace / "examples" / "dbbench" / "dev.jsonl").read_text().splitlines()
    (six / "dev.jsonl").write_text("\n".join(lines[:6]) + "\n")
    text = (workspace / "examples" / "dbbench" / "suite.yaml").read_text()
    (six / "suite.yaml").write_text(text.replace("name: dbbench-dev", "name: dbbench-six"))
    make_variant(workspace, "terse", "return messages + self.history(state)", "return messages")
    suite = ["--suite", "examples/dbbench-six", "--split", "dev", "--rollouts", 1]
    json_of("profile", "dbbench-base", "terse", "--base", "dbbench-base", *suite)
    top = json_of("runs")["runs"]
    assert [(r["command"], r["harness"], r["children"]) for r in top] == [
        ("profile", "dbbench-base", 2)
    ]
    every = json_of("runs", "--all")["runs"]
    evals = [r for r in every if r["parent_id"] == top[0]["id"]]
    assert sorted(r["harness"] for r in evals) == ["dbbench-base", "terse"]
    base_eval = next(r for r in evals if r["harness"] == "dbbench-base")
    assert top[0]["rollouts"] == base_eval["rollouts"] == 6
    assert top[0]["successes"] == base_eval["successes"]
    named = json_of("compare", "dbbench-base", "terse", *suite[:4])  # a suite directory
    assert named["pairs"] == 6 and named["b"]["id"] in {r["id"] for r in evals}


def test_a_profiles_evaluation_stands_for_its_harness_a_routed_sub_run_never(tmp_path):
    """A harness's evaluation inside a profile (or bench) is its run for `compare` by name
    and the report; a routed eval's sub-run (the routed tasks only) and an evolve's
    judgement are not."""
    from harnessctl.runs import latest_run, stands_for_harness
    from harnessctl.store import HarnessRow

    store = Store(f"sqlite:///{tmp_path / 's.db'}", tmp_path / "traj")
    for h, name in (("ha", "base"), ("hb", "sib")):
        store.upsert_harness(HarnessRow(hash=h, name=name, path="x", manifest_json="{}"))
    rows = [
        RunRow(id="prof0001", command="profile", harness_hash="ha", split="dev", started_at=1e9),
        RunRow(id="sibeval1", command="profile", harness_hash="hb", split="dev",
               parent_id="prof0001", started_at=1.1e9),
        RunRow(id="routed01", command="eval-routed", harness_hash="hb", split="dev",
               parent_id="eval0001", started_at=1.2e9),
        RunRow(id="judge001", command="evolve-judge", harness_hash="hb", split="dev",
               parent_id="evolve01", started_at=1.3e9),
    ]  # fmt: skip
    for row in rows:
        store.start_run(row)
        store.finish_run(row.id, "done", None)
    assert [stands_for_harness(store.run(r.id)) for r in rows] == [True, True, False, False]
    assert latest_run(store, "sib").id == "sibeval1"
    assert latest_run(store, "base").id == "prof0001"
