"""benchmarks/gate.py fails a rule that does not hold its level or has no power: the
benchmark can fail (issue #38), and passes the gate evolve uses on a small world."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # each run measures a world: 120 DBBench rollouts

SMALL = ["--envs", "dbbench", "--regimes", "weak", "--seeds", "3", "--runs", "4"]
SMALL += ["--power-runs", "30"]


def bench(tmp_path, *args) -> tuple[int, dict, str]:
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gate.py"), *SMALL, "--json", str(out), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return proc.returncode, json.loads(out.read_text()), proc.stdout


def test_a_rule_that_always_accepts_fails_the_level(tmp_path):
    code, figures, said = bench(tmp_path, "--rule", "always")
    assert code == 1
    level = figures["regimes"]["dbbench-weak"]["level"]
    assert level["rate"] == 1.0 and level["null_edits"] >= 20
    assert "FAILED dbbench-weak: level 1.000 > 0.1" in said
    assert "level: " in said and "power@+15: " in said


def test_a_rule_that_never_accepts_fails_the_power(tmp_path):
    code, figures, said = bench(tmp_path, "--rule", "never")
    assert code == 1
    assert figures["regimes"]["dbbench-weak"]["power"]["+15"]["rate"] == 0.0
    assert "FAILED dbbench-weak: power@+15 0.000 < 0.8" in said


def test_the_sequential_gate_holds_its_level_and_finds_a_15_point_repair(tmp_path):
    code, figures, said = bench(tmp_path)
    weak = figures["regimes"]["dbbench-weak"]
    assert weak["level"]["rate"] <= 0.1
    assert weak["power"]["+15"]["rate"] >= 0.8, said
    assert weak["power"]["+20"]["rate"] >= weak["power"]["+5"]["rate"]
    assert code == 0, said
