"""`harnessctl evolve` on the embedded default (rule-based editor, sim policy, train split):
distinct accepted siblings that complement each other, and kill -9 + rerun reproducing an
uninterrupted run without repeating rollouts, edits, directories or commits; the same on the
function-calling base (dbbench-fc) with its own catalogue repairs."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import git
import pytest

from harnessctl.workspace import init_workspace, load_workspace
from tests.helpers.worlds import DBBENCH_EVOLVE

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")

ARGS = [
    "evolve",
    "dbbench-base",
    "--split",
    "train",
    "--rounds",
    "2",
    "--rollouts",
    "2",
    "--workers",
    "2",
    "--json",
]


def make_ws(path):
    init_workspace(path)
    return path


def run_evolve(ws, *extra, args=ARGS):
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", *args, *extra],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout[proc.stdout.index("{") :])


def state(ws):
    store = load_workspace(ws).open_store()
    repo = git.Repo(ws)
    return {
        "rollouts": sorted(r.cache_key for r in store.rollouts()),
        "edits": sorted((e.id, e.status, e.rescues, e.regressions) for e in store.edits()),
        "commits": [c.message.splitlines()[0] for c in repo.iter_commits()],
        "dirs": sorted(p.name for p in (ws / "harnesses").iterdir() if p.is_dir()),
        "dirty": repo.is_dirty(untracked_files=True),
    }


@pytest.fixture(scope="module")
def reference(dbbench_world, tmp_path_factory):
    """The session's DBBench test evolve (these ARGS), copied for this module."""
    assert [str(a) for a in DBBENCH_EVOLVE] + ["--workers", "2", "--json"] == ARGS
    return dbbench_world.copy(tmp_path_factory.mktemp("reference") / "ws"), dbbench_world.result


def test_default_evolve_grows_complementary_siblings(reference):
    ws, result = reference
    best = result["best"]
    assert len(best) >= 3, result["edits"]
    # the gate and the error control it applied, as evolve states them (issue #38)
    assert result["gate"] == "sequential"
    assert result["error_control"].startswith("false discovery rate <= 0.1 over 10 judgements")
    for direction, variant in best.items():
        assert variant["rescues"] > 0, direction
        assert variant["name"] == f"dbbench-base.{direction}.r1" or ".r" in variant["name"]
    largest = max(v["rescues"] for v in best.values())
    assert result["union_rescues"] > largest  # complementarity
    s = state(ws)
    assert not s["dirty"]
    accepted = [e for e in result["edits"] if e["status"] == "accepted"]
    assert len(accepted) == len(result["variants"])
    assert sum(1 for c in s["commits"] if c.startswith("evolve: ")) == len(accepted)
    assert all(e["status"] in ("accepted", "evaluated", "rejected") for e in result["edits"])


def test_an_evolves_evaluations_are_runs_folded_under_it(reference):
    """Run identity (issue #41): the evolve is one run in `runs`, its figures the base's
    evaluation it reported; its evaluations, judgements and re-tests are runs under it."""
    from harnessctl.runs import list_runs

    ws, result = reference
    store = load_workspace(ws).open_store()
    evolves = [r for r in list_runs(store).runs if r.command == "evolve"]
    assert evolves and all(r.harness == "dbbench-base" for r in evolves)
    run = evolves[-1]  # the first evolve of the world
    assert run.success_rate == result["base_success"] and run.children > 0
    every = list_runs(store, everything=True).runs
    children = [r for r in every if r.parent_id == run.id]
    assert len(children) == run.children
    assert {"evolve-eval", "evolve-judge"} <= {r.command for r in children}
    assert not any(r.command.startswith("evolve-") and not r.parent_id for r in every)


def test_kill_9_then_rerun_matches_an_uninterrupted_run(reference, tmp_path):
    ref_ws, ref_result = reference
    ws = make_ws(tmp_path / "ws")
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harnessctl.cli", *ARGS],
        cwd=ws,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    store = load_workspace(ws).open_store()
    deadline = time.time() + 300
    while time.time() < deadline and len(store.edits()) < 3:  # killed mid-evolve
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(store.edits()) >= 3
    from harnessctl.sandbox import OWNER_FILE

    staging = [
        p
        for p in Path(tempfile.gettempdir()).glob("hxevolve-*")
        if (p / OWNER_FILE).is_file() and (p / OWNER_FILE).read_text().split()[0] == str(proc.pid)
    ]
    assert staging  # what the killed run left behind
    killed = {r.run_id for r in store.rollouts()}
    result = run_evolve(ws)
    assert not any(p.exists() for p in staging)  # cleaned by the next start
    assert {store.run(r).status for r in killed} <= {"died", "done"}  # none left running
    assert result["best"] == ref_result["best"]
    mine, ref = state(ws), state(ref_ws)
    assert mine["edits"] == ref["edits"]
    assert mine["rollouts"] == ref["rollouts"]  # no rollout repeated or missing
    assert mine["dirs"] == ref["dirs"]
    assert sorted(mine["commits"]) == sorted(ref["commits"])
    assert not mine["dirty"]


def test_export_edits_is_a_valid_task_disjoint_dataset(reference, tmp_path):
    from harnessctl.evolve.dataset import GRPORecord, SFTRecord

    ws, result = reference
    out = tmp_path / "data"
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harnessctl.cli",
            "export-edits",
            "--out",
            str(out),
            "--test-fraction",
            "0.5",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    records = {}
    manifest = json.loads((out / "manifest.json").read_text())
    for kind, model in (("sft", SFTRecord), ("grpo", GRPORecord)):
        for side in ("train", "test"):
            path = out / kind / f"{side}.jsonl"
            if not path.is_file():  # never an empty file: the manifest says why
                assert f"{kind}/{side}" in manifest["not_written"], manifest
            lines = path.read_text().splitlines() if path.is_file() else []
            assert lines or not path.is_file()
            records[kind, side] = [model.model_validate_json(line) for line in lines]
    assert records["grpo", "train"] and records["grpo", "test"]
    assert records["sft", "train"] or records["sft", "test"]
    accepted = sum(1 for e in result["edits"] if e["status"] == "accepted")
    assert len(records["sft", "train"]) + len(records["sft", "test"]) == accepted
    for kind in ("sft", "grpo"):
        train = {t for r in records[kind, "train"] for t in r.metadata.tasks}
        test = {t for r in records[kind, "test"] for t in r.metadata.tasks}
        assert not train & test
    for r in records["grpo", "train"] + records["grpo", "test"]:
        assert {t for t, _ in r.reward.batch} <= set(r.metadata.tasks)
        assert "### task" in r.prompt[1].content and r.reference_response
    for r in records["grpo", "train"] + records["grpo", "test"]:  # accepted: re-tested rescues
        assert (r.metadata.reproduction is not None) == (r.metadata.status == "accepted")
    sft = (records["sft", "train"] + records["sft", "test"])[0]
    assert [m.role for m in sft.messages[:2]] == ["system", "user"]
    assert sft.messages[-1].role == "assistant"  # a retried edit has the rejected turns between
    assert "<<<<<<< SEARCH" in sft.messages[-1].content
    schema = json.loads((out / "schema.json").read_text())
    assert set(schema) == {"sft", "sft_prompt_completion", "grpo"}


def test_accepted_edits_carry_the_reproduction_of_their_claimed_rescues(reference):
    """Each accepted edit's claimed rescues are re-tested where its parent fails afresh: the
    stored pairs are parent failures at fresh seeds of the rescued tasks, or held-out tasks of
    their categories; the child's stored rollouts give the figures; profile and the report
    show them."""
    from harnessctl.evolve.reproduce import read_reproduction

    ws, result = reference
    store = load_workspace(ws).open_store()
    suite = load_workspace(ws).load_suite(None)
    train = {t.id: t for t in suite.tasks("train").tasks}
    every = {t.id: t for t in suite.all_tasks.tasks}
    variants = {v["edit_id"]: v for v in result["variants"]}
    tested = 0
    for edit in store.edits():
        if not edit.accepted:
            continue
        metrics = json.loads(edit.metrics_json)
        repro = read_reproduction(metrics)
        assert repro is not None and repro.claimed == edit.rescues
        rescued = {t for t, _ in metrics["rescued"]}
        for pair in repro.pairs:
            if pair.kind == "fresh_seed":
                assert pair.task_id in rescued and pair.seed >= 2  # no seed the split used
            else:
                assert pair.task_id not in train
                assert every[pair.task_id].category in {train[t].category for t in rescued}
            for harness, want in ((edit.parent_hash, False), (edit.child_hash, pair.success)):
                rows = [
                    r
                    for r in store.rollouts(harness_hash=harness, task_id=pair.task_id)
                    if r.seed == pair.seed
                ]
                assert rows and all(r.success == want for r in rows), (pair, harness)
        assert repro.reproduced == sum(p.success for p in repro.pairs)
        assert variants[edit.id]["reproduction"] == repro.summary()
        tested += repro.tested
    assert tested > 0
    names = [v["name"] for v in result["best"].values()]
    profiled = run_evolve(
        ws, args=["profile", *names, "--split", "train", "--rollouts", "2", "--json"]
    )
    for name in names:
        shown = profiled["profiles"][name]["harness"]["reproduction"]
        assert shown == next(v["reproduction"] for v in result["variants"] if v["name"] == name)
    out = ws / "r.html"
    run_evolve(ws, args=["report", "--out", str(out), "--json"])
    html = out.read_text()
    for v in result["variants"]:
        if v["reproduction"]["tested"]:
            assert f"reproduce {v['reproduction']['reproduced']}/" in html


@pytest.mark.timeout(900)  # a whole evolve with the split guard's rollouts (a world's limit)
def test_evolve_on_the_function_calling_base_accepts_its_repairs(tmp_path):
    ws = make_ws(tmp_path / "ws")  # init copies every bundled base, dbbench-fc among them
    assert (ws / "harnesses" / "dbbench-fc" / "harness.yaml").is_file()
    args = ["evolve", "dbbench-fc", *ARGS[2:]]
    args[args.index("--rounds") + 1] = "1"
    result = run_evolve(ws, args=args)  # every direction, one round
    assert len(result["best"]) >= 2, result["edits"]  # issue #13: at least two accepted
    for direction, variant in result["best"].items():
        assert variant["name"] == f"dbbench-fc.{direction}.r1" and variant["rescues"] > 0
    # each direction found an fc-* repair that applied: none was rejected by validation
    assert {e["status"] for e in result["edits"]} <= {"accepted", "evaluated"}
    for variant in result["best"].values():  # siblings still speak function calling
        text = (ws / "harnesses" / variant["name"] / "harness.py").read_text(encoding="utf-8")
        assert "commit_final_answer" in text and "tool_specs = [EXECUTE_SQL" in text


def test_the_editor_remembers_its_tries_per_policy(dbbench_world, tmp_path):
    """The same base evolved again: under the same policy the rule-based editor does not
    propose the repair it already tried; under another policy (its failures are its own) it
    starts afresh in the same workspace (issue #43: the sim, then a real model)."""
    ws = dbbench_world.copy(tmp_path / "ws")
    store = load_workspace(ws).open_store()
    direction = "context-construction"
    first = next(e for e in store.edits(direction=direction) if e.round == 1 and e.attempt == 0)
    args = [
        "evolve", "dbbench-base", "--split", "train", "--rounds", "1", "--rollouts", "2",
        "--directions", direction, "--gate", "same-batch", "--workers", "2", "--json",
    ]  # fmt: skip
    before = {e.id for e in store.edits()}

    def proposals():
        new = [e for e in store.edits(direction=direction) if e.id not in before]
        before.update(e.id for e in new)
        return [e.response for e in new]

    run_evolve(ws, args=args)  # the same policy, another evolve id (another gate)
    assert first.response not in proposals()
    run_evolve(ws, args=[*args, "--param", "skill=0.45"])  # another policy
    assert proposals()[0] == first.response
