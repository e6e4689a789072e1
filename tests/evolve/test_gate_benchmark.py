"""benchmarks/gate.py checks what the README claims of the gate (issues #38, #54): it fails a
rule that accepts every edit, one that accepts none, the gate without the split guard (it
commits trade-offs) and the gate without error control, and passes evolve's own rule.

One world (DBBench, weak base, 3 seeds per task: 120 rollouts of the real engine) is measured
once for the module and shared through ``--worlds``; each run then only simulates, with a
fixed seed and few Monte Carlo runs, sized so that each failure is unmistakable."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # the shared world: 120 DBBench rollouts

WORLD = ["--envs", "dbbench", "--regimes", "weak", "--seeds", "3"]


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    where = tmp_path_factory.mktemp("worlds")
    code, _, said = _run(where, where / "measure.json", "--runs", "1", "--power-runs", "1")
    assert (where / "dbbench-weak-skill0.4-seeds3.json").is_file(), said
    return where


def _run(worlds, out, *args) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gate.py"), *WORLD, "--worlds", str(worlds),
         "--json", str(out), *args],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    return proc.returncode, json.loads(out.read_text()), proc.stdout + proc.stderr


def bench(worlds, tmp_path, *args) -> tuple[int, dict, str]:
    code, figures, said = _run(worlds, tmp_path / "figures.json", *args)
    return code, figures["regimes"]["dbbench-weak"], said


def test_a_rule_that_always_accepts_fails_every_level(worlds, tmp_path):
    code, weak, said = bench(worlds, tmp_path, "--rule", "always", "--runs", "3",
                             "--power-runs", "5")  # fmt: skip
    assert code == 1
    assert weak["null"]["per_judgement"]["rate"] == 1.0
    assert "FAILED dbbench-weak: run-level false discovery 1.000 > 0.1" in said
    assert "FAILED dbbench-weak: level 1.0000 per judgement > 0.01 (alpha / m)" in said
    assert "FAILED dbbench-weak: trade-off (+0 split points) committed in 1.000" in said


def test_a_rule_that_never_accepts_fails_the_power(worlds, tmp_path):
    code, weak, said = bench(worlds, tmp_path, "--rule", "never", "--runs", "3",
                             "--power-runs", "5")  # fmt: skip
    assert code == 1
    assert weak["power"]["+15"]["rate"] == 0.0
    assert "FAILED dbbench-weak: power@+15 split points 0.000 < 0.8" in said


def test_the_gate_without_the_split_guard_commits_trade_offs(worlds, tmp_path):
    code, weak, said = bench(worlds, tmp_path, "--rule", "no-guard", "--runs", "10",
                             "--power-runs", "5", "--trade-offs", "0")  # fmt: skip
    assert code == 1
    trade = weak["trade_offs"]["+0"]
    assert trade["runs"]["rate"] >= 0.5, said  # measured 1.0: unmistakable
    assert "FAILED dbbench-weak: trade-off (+0 split points) committed in" in said


def test_the_gate_without_error_control_commits_trade_offs_in_too_many_runs(worlds, tmp_path):
    code, weak, said = bench(worlds, tmp_path, "--error-control", "none", "--runs", "100",
                             "--power-runs", "5", "--trade-offs", "0")  # fmt: skip
    assert code == 1, said
    assert weak["trade_offs"]["+0"]["runs"]["rate"] > 0.1


def test_evolves_rule_holds_every_claim_and_finds_a_15_point_gain(worlds, tmp_path):
    code, weak, said = bench(worlds, tmp_path, "--runs", "10", "--power-runs", "30")
    assert weak["null"]["runs"]["rate"] <= 0.1 and weak["null"]["per_judgement"]["rate"] <= 0.01
    for trade in weak["trade_offs"].values():
        assert trade["runs"]["rate"] <= 0.1
        assert trade["gate_only_rate"] > 0.2  # the gate alone accepts them: the guard stops them
    assert weak["power"]["+15"]["rate"] >= 0.8, said
    assert weak["power"]["+20"]["rate"] >= weak["power"]["+5"]["rate"]
    assert code == 0, said
    assert "trade-off +0:" in said and "power@+15pts:" in said and "(gate alone" in said
