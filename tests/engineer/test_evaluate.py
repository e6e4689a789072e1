"""The engineer benchmark's decision rule (harnessctl.engineer.evaluate): the one-sided
sign-flip test is exact, holds its level under the null when contexts differ in difficulty,
gains power with contexts and proposals, and the claim needs validity and effect both."""

from __future__ import annotations

import pytest

from harnessctl.engineer.evaluate import (
    Arm,
    Interval,
    PairedTest,
    Scored,
    bootstrap,
    claim_holds,
    operating,
    paired,
    sign_flip_greater,
)


def test_the_sign_flip_test_is_exact():
    assert sign_flip_greater([1, 1, 1]) == 1 / 8  # only all three signs as observed
    assert sign_flip_greater([1, -1]) == 3 / 4  # sums 2, 0, 0, -2: three at least 0
    assert sign_flip_greater([0.5, 0.0, 0.0]) == 1 / 2  # no-difference contexts do not count
    assert sign_flip_greater([0, 0]) == 1.0
    assert sign_flip_greater([-1, -1, -1]) == 1.0
    many = sign_flip_greater([1.0] * 20, draws=20_000)  # Monte Carlo past 16
    assert many == pytest.approx(1 / 20_001, abs=2e-4)


@pytest.mark.slow  # about 2 s of simulation
def test_the_rule_holds_its_level_and_gains_power():
    level = operating(12, 2, 0.3, 0.3, alpha=0.05, sims=400, seed=1)
    assert level <= 0.05 + 0.03  # 400 draws: a binomial margin above the nominal level
    weak = operating(12, 2, 0.3, 0.45, alpha=0.05, sims=200, seed=2)
    strong = operating(12, 2, 0.3, 0.7, alpha=0.05, sims=200, seed=3)
    assert weak < strong and strong > 0.6
    assert operating(6, 1, 0.3, 0.6, sims=200) < 0.1  # the CPU preset's size sees little


def arm(name, valid, effect):
    return Arm(name, [[Scored(v, False, e, "r")] for v, e in zip(valid, effect, strict=True)])


def test_paired_comparison_and_the_claim():
    trained = arm("grpo-0.5b", [1, 1, 1, 1, 1, 1], [0.2, 0.1, 0.1, 0.3, 0.1, 0.2])
    untrained = arm("untrained-0.5b", [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0])
    tests = [paired(trained, untrained, m) for m in ("valid", "effect")]
    assert all(t.p_value == 1 / 64 and t.difference.mean > 0 for t in tests)
    assert claim_holds(tests, "grpo-0.5b", 0.05)
    assert not claim_holds(tests[:1], "grpo-0.5b", 0.05)  # validity alone is not the claim
    worse = PairedTest(
        a="grpo-0.5b", b="untrained-0.5b", metric="effect",
        difference=Interval(mean=-0.1, low=-0.2, high=0.0), p_value=0.9,
    )  # fmt: skip
    assert not claim_holds([tests[0], worse], "grpo-0.5b", 0.05)


def test_the_bootstrap_interval_holds_the_mean():
    found = bootstrap([0.0, 0.5, 1.0, 0.25])
    assert found.low <= found.mean == 0.4375 <= found.high
    assert bootstrap([]) == Interval(mean=0.0, low=0.0, high=0.0)
