"""Every ``--json`` a command prints is the dump of a typed, versioned result model: it
validates back into its model and names its kind and version. One small workspace per
module (12 DBBench tasks, the sim policy, the rule-based editor, one direction, one round);
each stage reuses the rollouts the stages before it cached."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessctl.cli import app
from harnessctl.evolve.engine import EvolveRecord
from harnessctl.pool.simulate import RescueSimResult
from harnessctl.regress.runner import RegressResult
from harnessctl.report import ReportResult
from harnessctl.results import ExportEditsResult, ExportPoolResult, InitResult, VerifyResult
from harnessctl.summary import EvalRecord, RolloutListRecord, RoutedEvalRecord
from harnessctl.workspace import init_workspace

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")

BASE = "dbbench-base"
DIRECTION = "format-validation"
runner = CliRunner()


def mini_suite(root: Path) -> str:
    """Four tasks of each kind from the example suite, split as the full suite is."""
    kinds: dict[str, list[str]] = {}
    for line in (root / "examples" / "dbbench" / "dev.jsonl").read_text().splitlines():
        kind = json.loads(line)["type"][0]
        kinds.setdefault(kind if kind in ("INSERT", "UPDATE") else "query", []).append(line)
    suite = root / "examples" / "mini"
    suite.mkdir(parents=True)
    (suite / "tasks.jsonl").write_text("".join(f"{x}\n" for g in kinds.values() for x in g[:4]))
    (suite / "suite.yaml").write_text(
        "name: mini\nenv: dbbench\ntasks: [tasks.jsonl]\nsplits:\n"
        "  train: {partition: {seed: 13, fraction: 0.67, stratify: category}}\n"
        "  test: {complement_of: train}\n"
    )
    return "examples/mini"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A workspace whose default suite is the mini suite; isolated as conftest isolates a
    test (module-scoped fixtures start before its fixture), for the module's duration."""
    root = tmp_path_factory.mktemp("json") / "ws"
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith("HARNESSCTL_") or key.endswith("_API_KEY"):
                mp.delenv(key)
        for key, value in {
            "HOME": str(tmp_path_factory.mktemp("home")),
            "NO_COLOR": "1",
            "COLUMNS": "120",
            "GIT_AUTHOR_NAME": "Test",
            "GIT_AUTHOR_EMAIL": "test@example.invalid",
            "GIT_COMMITTER_NAME": "Test",
            "GIT_COMMITTER_EMAIL": "test@example.invalid",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }.items():
            mp.setenv(key, value)
        init_workspace(root)
        config = root / "harnessctl.yaml"
        config.write_text(config.read_text().replace("examples/dbbench", mini_suite(root)))
        mp.chdir(root)
        yield root


def invoke(ws: Path, *args):
    return runner.invoke(app, [str(a) for a in args], env={"HARNESSCTL_WORKSPACE": str(ws)})


def cli_json(ws: Path, *args, code: int = 0) -> dict:
    result = invoke(ws, *args, "--json")
    assert result.exit_code == code, result.output[-3000:]
    return json.loads(result.stdout[result.stdout.index("{") :])


# The keys each --json printed before it was a model's dump (consumers parse them), plus
# kind and version (``test`` printed the bare list of checks; now it is under ``checks``).
KEYS = {
    "eval": "run_id harness harness_hash policy cached executed infra_failed problems summary",
    "eval-routed": "harness policy rollouts_per_task base routed delta routed_tasks choices "
    "chosen_counts extra_rollouts route_when verifier routed_side_rollouts profile_splits tasks "
    "in_sample_tasks out_of_sample informed_by",
    "evolve": "evolve_id base_success union_rescues stopped gate error_control variants best edits "
    "guard budget history",
    "test": "checks errors run_id",
    "rescue-sim": "groups all_fail rescued extra_rollouts by_harness tasks",
    "report": "path bytes harnesses policy suite split embedded",
    "init": "root harnesses",
    "export-edits": "out counts empty",
    "export-pool": "pool_id path archive harnesses profile_splits left_out",
    "pool-verify": "path ok problems pool_id harnesses",
    "rollouts": "rollouts attempts",
}
# version 2: eval-routed says which tasks informed the comparison; test names the harnesses
# it could not check; export-pool says which split each frozen profile is on. test 3: its run
VERSIONS = {"eval-routed": 3, "test": 3, "export-pool": 2}
# the simulated policy draws its failures per seed, so a sibling's claimed rescues rarely recur on
# fresh seeds and export-pool leaves it out; the README's advice on the sim is this flag
KEEP_SIM = ("--include-unreproduced",)


def keys(words: str) -> list[str]:
    return words.split()


SUMMARY = keys(
    "rollouts successes success_rate ci95 outcomes categories tasks mean_steps prompt_tokens "
    "completion_tokens cost_usd wall_p50_s wall_p95_s"
)


def check(model, data: dict, kind: str):
    """``data`` is exactly the dump of ``model``'s validation of it, of kind ``kind``, with
    the keys it had before."""
    typed = model.model_validate(data)
    assert typed.model_dump(mode="json") == data
    assert data["kind"] == kind and data["version"] == VERSIONS.get(kind, 1)
    assert list(data) == ["kind", "version", *keys(KEYS[kind])]
    return typed


@pytest.fixture(scope="module")
def evolved(ws):
    data = cli_json(
        ws, "evolve", BASE, "--split", "train", "--directions", DIRECTION, "--rounds", 1,
        "--rollouts", 2, "--batch", 4, "--control", 4, "--alpha", 1,
    )  # fmt: skip
    return check(EvolveRecord, data, "evolve")


@pytest.fixture(scope="module")
def baselined(ws, evolved):
    names = [BASE, *sorted(v.name for v in evolved.best.values())]
    result = invoke(ws, "test", *names, "--update-baseline", "--split", "train")
    assert result.exit_code == 0, result.output[-3000:]
    return names


def test_eval_json_is_an_eval_record(ws):
    data = cli_json(ws, "eval", BASE, "--split", "test", "--rollouts", 1)
    record = check(EvalRecord, data, "eval")
    assert record.harness == BASE and record.policy == "sim/dbbench"
    assert record.summary.rollouts == record.executed + record.cached > 0
    assert sum(c.rollouts for c in record.summary.categories.values()) == record.summary.rollouts
    assert list(data["summary"]) == SUMMARY
    assert {tuple(c) for c in data["summary"]["categories"].values()} == {
        ("rollouts", "successes", "success_rate")
    }


def test_evolve_json_is_an_evolve_record(evolved):
    assert evolved.edits and {e.direction for e in evolved.edits} == {DIRECTION}
    assert list(evolved.best) == [DIRECTION] and evolved.variants  # --alpha 1: accepted
    assert evolved.variants[-1].name == evolved.best[DIRECTION].name
    data = evolved.model_dump(mode="json")
    assert list(data["variants"][0]) == keys(
        "name direction hash parent edit_id round commit rescues regressions success_rate cost_usd "
        "reproduction"
    )
    assert list(data["variants"][0]["reproduction"]) == keys(
        "claimed tested reproduced fraction fresh_seeds held_out null verdict"
    )
    assert list(data["best"][DIRECTION]) == keys("name rescues regressions success_rate")
    assert list(data["edits"][0]) == keys(
        "id direction round attempt status reason rescues regressions reward"
    )


def test_test_json_is_a_regress_result(ws, baselined):
    result = check(RegressResult, cli_json(ws, "test", "--split", "train"), "test")
    assert {c.harness for c in result.checks} == set(baselined)
    assert all(c.passed for c in result.checks)  # the same cached rollouts: nothing dropped
    assert "infra_failed" not in result.model_dump()
    assert list(result.model_dump()["checks"][0]) == keys("harness name passed message details")


def test_rescue_sim_json_is_a_rescue_sim_result(ws, baselined):
    out = ws.parent / "pool"
    pool = check(
        ExportPoolResult,
        cli_json(ws, "export-pool", "--name", "mini", "--out", out, *KEEP_SIM),
        "export-pool",
    )
    assert Path(pool.path) == out and Path(pool.archive).is_file() and BASE in pool.harnesses
    assert set(pool.profile_splits) == set(pool.harnesses) and BASE in pool.profile_splits
    verified = check(VerifyResult, cli_json(ws, "pool", "verify", out), "pool-verify")
    assert verified.ok and verified.pool_id == pool.pool_id and verified.problems == []
    data = cli_json(ws, "rescue-sim", out, "--split", "test", "--group-size", 2)
    result = check(RescueSimResult, data, "rescue-sim")
    assert result.groups == len(result.tasks) > 0
    assert result.extra_rollouts == 2 * sum(1 for t in result.tasks if t.routed)
    assert list(data["tasks"][0]) == keys("task_id all_fail replaced routed reason")


def test_routed_eval_and_report_json(ws, baselined):
    data = cli_json(ws, "eval", BASE, "--split", "test", "--rollouts", 1, "--router", "harnesses")
    routed = check(RoutedEvalRecord, data, "eval-routed")
    assert routed.harness == BASE and routed.base.rollouts == routed.routed.rollouts
    page = ws / "out" / "report.html"
    report = check(ReportResult, cli_json(ws, "report", "--out", page, "--per-cell", 1), "report")
    assert Path(report.path) == page and page.stat().st_size == report.bytes


def test_init_rollouts_and_export_edits_json(ws, evolved, tmp_path):
    made = check(InitResult, cli_json(ws, "init", tmp_path / "fresh"), "init")
    assert made.harnesses == [
        "alfworld-base",
        "dbbench-base",
        "dbbench-fc",
        "dbbench-paraphrase",
        "miniwob-base",
        "os-base",
        "tau2-base",
    ]
    listed = check(RolloutListRecord, cli_json(ws, "rollouts", "--limit", 3), "rollouts")
    assert len(listed.rollouts) == 3 and listed.attempts == []
    out = tmp_path / "edits"
    result = invoke(ws, "export-edits", "--out", out, "--test-fraction", 0, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    exported = check(ExportEditsResult, data, "export-edits")
    assert exported.counts["grpo/test"] == 0 and "grpo/test" in exported.empty
    assert "grpo/test.jsonl has no record" in result.stderr.replace("\n", "")


def test_profile_route_and_show_json_share_the_envelope(ws, baselined):
    """``profile``, ``route`` and ``show`` print the same envelope as every other command:
    ``kind``, ``version``, then the payload, each the dump of its typed model."""
    from harnessctl.records import Trajectory
    from harnessctl.results import ProfilesResult, RouteRecord
    from harnessctl.suite import load_suite

    data = cli_json(ws, "profile", *baselined, "--split", "test", "--rollouts", 1)
    profiles = ProfilesResult.model_validate(data)
    assert list(data)[:2] == ["kind", "version"] and data["kind"] == "profile"
    assert profiles.base == BASE and set(profiles.profiles) == set(baselined)
    assert profiles.model_dump(mode="json") == data
    listed = cli_json(ws, "rollouts", "--harness", BASE, "--limit", 50)["rollouts"]
    failed = next(r for r in listed if r["outcome"] != "success")
    data = cli_json(ws, "route", "--task", failed["task"], "--failures", failed["id"])
    route = RouteRecord.model_validate(data)
    # version 3: the profiles read (split, harnesses, why) under ``evidence`` (issue #56)
    assert list(data)[:2] == ["kind", "version"] and (data["kind"], data["version"]) == (
        "route",
        3,
    )
    assert route.task_id == failed["task"] and route.model_dump(mode="json") == data
    # the split of the evidence (profiled on test) and whether the task was in it
    assert set(route.profile_splits.values()) == {"test"}
    assert route.evidence is not None and route.evidence.split == "test"
    assert route.evidence.harnesses == sorted(route.profile_splits)
    test_tasks = {t.id for t in load_suite(ws / "examples" / "dbbench").tasks("test").tasks}
    assert route.in_sample == (failed["task"] in test_tasks)
    result = invoke(ws, "show", failed["id"], "--json")
    assert result.exit_code == 0, result.output[-2000:]
    shown = json.loads(result.stdout)
    assert list(shown)[:2] == ["kind", "version"] and shown["kind"] == "trajectory"
    assert Trajectory.load(shown).rollout_id == failed["id"]
