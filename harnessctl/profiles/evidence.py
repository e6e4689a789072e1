"""Which profiles a router reads: one split for every candidate, chosen by one rule that
``harnessctl route`` and ``harnessctl eval --router`` share (issue #56).

Both used to pick each candidate's profile on its own (another split than the judged one,
then the newest): the two commands could read different splits, and one ranking could mix
them. Now a split is chosen once, for all candidates, by :func:`choose_split` unless the
caller names one, and what was read is returned as a :class:`ProfileEvidence` to print.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import HarnessctlError

DEFAULT_EVIDENCE_SPLIT = "train"
"""The split ``harnessctl profile`` builds by default (and ``bench --evidence-split``
reads): among splits otherwise equal, the routing default reads this one."""


class ProfileEvidence(BaseModel):
    """The profiles a ranking read: one split, the harnesses whose profiles were read, and
    why that split (``route --json``'s ``evidence``; ``eval --router`` prints it)."""

    model_config = ConfigDict(extra="forbid")

    policy: str
    """The policy id the profiles were built under."""
    suite: str
    """The suite the profiles were built on."""
    split: str
    """The split of every profile read."""
    asked: bool = False
    """True when the caller named the split (``route --split``); False when
    :func:`choose_split` chose it."""
    reason: str = ""
    """Why this split, in words."""
    harnesses: list[str] = Field(default_factory=list)
    """The harnesses whose profiles were read (the candidates ranked), by name."""
    left_out: dict[str, list[str]] = Field(default_factory=dict)
    """Candidates of a default pool left out for want of a profile on ``split``, each with
    the splits it has profiles on."""

    def describe(self) -> str:
        """One line for a terminal: which profiles, from where, and why."""
        out = (
            f"profiles read: {self.suite}/{self.split} under {self.policy}, of "
            f"{', '.join(self.harnesses)} ({self.reason})"
        )
        if self.left_out:
            out += "; left out (no profile on this split): " + ", ".join(
                f"{name} (has {', '.join(splits) or 'none'})"
                for name, splits in sorted(self.left_out.items())
            )
        return out


def choose_split(available: dict[str, set[str]], *, judged: str | None = None) -> tuple[str, str]:
    """The split routing reads when none is named, and why: ``available`` maps each candidate
    to the splits it has a current profile on, ``judged`` is the split of the tasks being
    routed. Preferred, in order: a split every candidate has (one ranking, one evidence);
    one other than ``judged`` (evidence from other tasks than those routed); train
    (:data:`DEFAULT_EVIDENCE_SPLIT`, what ``profile`` builds); the most candidates; the
    name. No clock decides: the same profiles give the same split whatever order they were
    built in."""
    splits = sorted(set().union(*available.values()))
    if not splits:
        raise HarnessctlError("no candidate harness has a profile: run `harnessctl profile`")
    covered = {s: sum(s in have for have in available.values()) for s in splits}

    def rank(split: str) -> tuple:
        return (
            covered[split] == len(available),
            split != judged,
            split == DEFAULT_EVIDENCE_SPLIT,
            covered[split],
        )

    best = max(splits, key=rank)  # the first of equals: the name decides last
    parts = [
        "every candidate has a profile on it"
        if covered[best] == len(available)
        else f"{covered[best]} of {len(available)} candidates have a profile on it"
    ]
    if judged is not None:
        parts.append(
            f"not the routed tasks' split ({judged})"
            if best != judged
            else "the routed tasks' own split: no other covers the candidates as well"
        )
    if best == DEFAULT_EVIDENCE_SPLIT and len(splits) > 1:
        parts.append(f"{DEFAULT_EVIDENCE_SPLIT} before other splits")
    return best, "default: " + "; ".join(parts)


def read_evidence(
    store: Any,
    specs: list,
    *,
    policy_id: str,
    suite: str,
    judged_split: str | None = None,
    split: str | None = None,
    drop_missing: bool = False,
) -> tuple[dict[str, Any], ProfileEvidence]:
    """The profiles a router ranks ``specs`` (harness specs) by, all of one split, and what
    was read. ``split``: that one (``route --split``); else :func:`choose_split` over the
    candidates' current profiles under ``policy_id`` on ``suite``, ``judged_split`` being
    the routed tasks' split. A candidate without a profile on the split is an error naming
    it, unless ``drop_missing`` (a pool made of whatever is profiled): then it is left out
    and named in ``left_out``."""
    from .runner import load_profiles

    available = {
        spec.name: {
            row.split
            for row in store.profiles(harness_hash=spec.hash, policy_id=policy_id, suite=suite)
        }
        for spec in specs
    }
    if split is not None:
        chosen, reason = split, "named by --split"
    else:
        if not any(available.values()):
            raise HarnessctlError(
                f"no profile of {', '.join(available) or 'any candidate'} under policy "
                f"{policy_id} on suite {suite}: run `harnessctl profile` first"
            )
        chosen, reason = choose_split(available, judged=judged_split)
    missing = {name: sorted(have) for name, have in available.items() if chosen not in have}
    if missing and not drop_missing:
        raise HarnessctlError(
            f"no profile on {suite}/{chosen} under policy {policy_id} of "
            + "; ".join(f"{n} (has {', '.join(s) or 'none'})" for n, s in missing.items())
            + f": profile them on it (`harnessctl profile ... --split {chosen}`)"
            + ("" if split is not None else " or name a split every candidate has (--split)")
        )
    kept = [spec for spec in specs if spec.name not in missing]
    if not kept:
        raise HarnessctlError(
            f"no candidate harness has a profile on {suite}/{chosen} under policy {policy_id}"
        )
    profiles = load_profiles(store, kept, policy_id=policy_id, suite=suite, split=chosen)
    evidence = ProfileEvidence(
        policy=policy_id,
        suite=suite,
        split=chosen,
        asked=split is not None,
        reason=reason,
        harnesses=sorted(profiles),
        left_out=missing,
    )
    return profiles, evidence
