"""Certified acceptance: the null editor's edits change nothing, the offline policies'
``resample`` re-draws per harness (so null edits can change outcomes, as with a sampled
model), and benchmarks/null_edits.py judges them with evolve's own rule and prints the false
acceptance rate with its interval."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harnessctl.evolve.directions import Direction
from harnessctl.evolve.editors import EditContext, make_editor
from harnessctl.evolve.null import KINDS, NullEditor
from harnessctl.evolve.patch import apply_blocks, parse_patch
from harnessctl.policies.serve import OfflineRequestError, _seed
from harnessctl.workspace import init_workspace
from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")

RATE = r"(\d\.\d{3})"
LINE = re.compile(rf"^false acceptance: (\d+)/(\d+) \({RATE}, 95% CI {RATE}-{RATE}\)$")


def evolve_json(ws: Path, *args: str) -> dict:
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", "evolve", *args, "--json"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout[proc.stdout.index("{") :])


def test_resample_redraws_per_harness_and_zero_keeps_the_draws_paired():
    tags = {"seed": 3, "harness": "a" * 64}
    other = {"seed": 3, "harness": "b" * 64}
    assert _seed(tags, {}) == _seed(other, {}) == 3  # paired: any harness draws alike
    assert _seed(tags, {"resample": 0}) == 3
    one = _seed(tags, {"resample": 1})
    assert one == _seed(dict(tags), {"resample": 1})  # the same harness: reproducible
    assert one not in (3, _seed(other, {"resample": 1}), _seed(tags, {"resample": 2}))
    for bad in (-1, "x", 1.5, True):
        with pytest.raises(OfflineRequestError, match="resample"):
            _seed(tags, {"resample": bad})


def test_the_null_editor_rotates_its_kinds_and_every_patch_applies_to_each_base():
    editor = make_editor("null", family="dbbench")
    assert isinstance(editor, NullEditor)
    for base in ("dbbench-base", "dbbench-fc", "alfworld-base"):
        root = ROOT / "harnesses" / base
        files = {
            p.relative_to(root).as_posix(): p.read_text()
            for p in root.rglob("*")
            if p.is_file() and p.suffix in (".py", ".md")
        }
        narrow = Direction(name="d", title="t", brief="b", targets=["wrong_answer"])
        narrow = narrow.model_copy(update={"files": ["harness.py"]})
        wide = narrow.model_copy(update={"files": ["harness.py", "prompts/*"]})
        editor = NullEditor()
        kinds = []
        for direction in (wide, wide, wide, narrow, narrow, narrow):
            scoped = {r: t for r, t in files.items() if direction.allows(r)}
            proposal = editor.propose(EditContext(direction, scoped, []), None)
            assert proposal is not None
            kinds.append(editor.proposed[-1])
            changed = apply_blocks(root, parse_patch(proposal.response))
            for rel, text in changed.items():
                assert direction.allows(rel)
                if rel.endswith(".py"):
                    compile(text, rel, "exec")
                    code = [ln for ln in text.splitlines() if not ln.startswith(("#", "_NULL"))]
                    orig = [ln for ln in files[rel].splitlines()]
                    assert [ln for ln in code if ln.strip()] == [ln for ln in orig if ln.strip()]
                else:  # trailing spaces only
                    assert [ln.rstrip() for ln in text.splitlines()] == [
                        ln.rstrip() for ln in files[rel].splitlines()
                    ]
        assert kinds[:3] == list(KINDS), base
        assert "whitespace" not in kinds[3:]  # no prompt in scope: a comment instead


def test_null_edits_with_paired_draws_change_no_outcome(dbbench_world, tmp_path):
    """Without resample the sims draw alike under any harness: every null edit re-runs its
    batch and control exactly as the parent did, so none rescues, regresses or is accepted."""
    ws = tmp_path / "ws"
    init_workspace(ws)
    with dbbench_world.read_through():  # the base's rollouts; the null edits' are new
        result = evolve_json(ws, "dbbench-base", "--editor", "null", "--rounds", "1")
    judged = [e for e in result["edits"] if e["status"] != "rejected"]
    assert len(judged) == len(result["edits"]) == 5  # one per direction, every patch valid
    assert all(e["rescues"] == 0 and e["regressions"] == 0 for e in judged)
    assert result["variants"] == []


def test_the_benchmark_judges_null_edits_with_evolves_rule_and_prints_the_rate(tmp_path):
    spec = importlib.util.spec_from_file_location("null_edits", ROOT / "benchmarks/null_edits.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "null.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/null_edits.py"),
            "--envs",
            "dbbench",
            "--edits",
            "10",
            "--rounds",
            "1",
            "--max-looks",
            "3",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    match = LINE.match(last)
    assert match, last
    accepted, n = int(match[1]), int(match[2])
    figures = json.loads(out.read_text())
    env = figures["environments"]["dbbench"]
    assert n == figures["null_edits"] == env["null_edits"] == len(env["edits"]) >= 10
    assert accepted == sum(e["status"] == "accepted" for e in env["edits"])
    assert env["rejected_patches"] == 0 and env["runs"] == 2
    assert {e["resample"] for e in env["edits"]} == {1, 2}
    # resampled draws do change outcomes: the test is not vacuous
    assert any(e["rescues"] or e["regressions"] for e in env["edits"])
    lo, hi = bench.wilson(accepted, n)
    assert (float(match[4]), float(match[5])) == (round(lo, 3), round(hi, 3))
    assert lo <= accepted / n <= hi


def test_a_confirmation_reruns_parent_and_child_at_fresh_seeds_and_decides(dbbench_world, tmp_path):
    """With --confirm-seeds, an edit the same-batch test accepts is re-run with its parent on
    the judged tasks at fresh seeds; the stored wins and losses are those rollouts' and the
    confirmation's verdict is the edit's."""
    from harnessctl.workspace import load_workspace

    ws = tmp_path / "ws"
    init_workspace(ws)
    directions = "execution-recovery,observation-shaping"
    args = ("--directions", directions, "--rounds", "1", "--gate", "same-batch")
    args += ("--confirm-seeds", "2")
    with dbbench_world.read_through():  # the base's rollouts; the rest run here
        result = evolve_json(ws, "dbbench-base", *args)
    store = load_workspace(ws).open_store()
    confirmed = 0
    for edit in store.edits():
        metrics = json.loads(edit.metrics_json or "{}")
        check = metrics.get("confirmation")
        if check is None:  # the same-batch test turned it down: nothing to confirm
            assert not edit.accepted
            continue
        assert check["seeds"] == [2, 3]  # after the split's seeds 0 and 1
        tasks = list(dict.fromkeys(t for t, _ in metrics["batch"] + metrics["control"]))
        assert check["pairs"] == 2 * len(tasks)

        def outcomes(harness_hash):
            rows = store.rollouts(harness_hash=harness_hash)
            return {(r.task_id, r.seed): r.success for r in rows if r.seed in (2, 3)}

        parent, child = outcomes(edit.parent_hash), outcomes(edit.child_hash)
        pairs = [(t, s) for t in tasks for s in (2, 3)]
        assert all(p in parent and p in child for p in pairs)
        wins = sum(1 for p in pairs if child[p] and not parent[p])
        losses = sum(1 for p in pairs if parent[p] and not child[p])
        assert (check["wins"], check["losses"]) == (wins, losses)
        assert edit.accepted == check["accepted"] and "confirmed on fresh seeds" in edit.reason
        confirmed += 1
    assert confirmed >= 1
    assert len(result["variants"]) == sum(1 for e in store.edits() if e.accepted)
