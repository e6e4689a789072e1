"""A routable profile built by hand: rescue evidence and a card, every other number zero."""

from __future__ import annotations

from harnessctl.records import (
    Card,
    HarnessRef,
    Profile,
    ProfileHarness,
    ProfilePolicy,
    Rate,
    Rescue,
    RescueCell,
    RescueEvidence,
    Spread,
    SuiteRef,
)

Cells = dict[str, tuple[int, int]]


def routable_profile(
    name: str,
    overall: tuple[int, int],
    by_category: Cells | None = None,
    by_outcome: Cells | None = None,
) -> Profile:
    """``overall``, ``by_category`` and ``by_outcome`` are (rescued, of) pairs."""

    def cells(d: Cells | None) -> dict[str, RescueCell]:
        return {k: RescueCell(rescued=r, of=n) for k, (r, n) in (d or {}).items()}

    zero = Spread(mean=0.0, p50=0.0, p90=0.0, max=0.0)
    return Profile(
        harness=ProfileHarness(name=name, hash=name * 8),
        base=HarnessRef(name="base", hash="b" * 64),
        policy=ProfilePolicy(id="sim/dbbench", model="sim/dbbench"),
        suite=SuiteRef(id="dbbench-dev@x", name="dbbench-dev"),
        split="train",
        tasks=0,
        seeds=[],
        success=Rate(successes=0, rollouts=0, rate=0.0, ci95=[0.0, 1.0]),
        steps=zero,
        tokens=zero,
        cost_usd=zero,
        latency_s=zero,
        rescue=Rescue(
            opportunities=0,
            count=0,
            rate=0.0,
            evidence=RescueEvidence(
                rescued=overall[0],
                base_failures=overall[1],
                by_category=cells(by_category),
                by_outcome=cells(by_outcome),
            ),
        ),
        card=Card(summary=f"card of {name}"),
    )
