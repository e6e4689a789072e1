"""Same-batch reward and the acceptance rule.

The child is re-run on exactly the (task, seed) pairs of the parent's failure batch
(rescues) and of a sample of the parent's successes (regressions). Pairs make the
comparison paired: with b rescues and c regressions, the exact one-sided sign test (McNemar)
asks how likely b or more of the b+c discordant pairs favour the child if the edit did
nothing: p = P(X >= b), X ~ Binomial(b + c, 1/2). An edit is accepted when
``b - c >= min_net`` and ``p <= alpha`` (flags ``--min-net`` and ``--alpha``). The reward
stored with the edit is (b - c) / (batch + control).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb


@dataclass(frozen=True)
class Verdict:
    rescues: int
    regressions: int
    batch: int
    control: int
    p_value: float
    reward: float
    accepted: bool
    reason: str


def sign_test(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    return sum(comb(n, i) for i in range(b, n + 1)) / 2**n


def judge(
    rescues: int,
    regressions: int,
    batch: int,
    control: int,
    *,
    alpha: float = 0.1,
    min_net: int = 1,
) -> Verdict:
    p = sign_test(rescues, regressions)
    net = rescues - regressions
    reward = net / max(1, batch + control)
    if net < min_net:
        reason = f"net {net:+d} below the minimum {min_net}"
        ok = False
    elif p > alpha:
        reason = f"p={p:.3f} above alpha {alpha}"
        ok = False
    else:
        reason = f"{rescues} rescued, {regressions} regressed, p={p:.3f}"
        ok = True
    return Verdict(rescues, regressions, batch, control, p, reward, ok, reason)
