"""The behavior card: a few sentences derived from a profile and its base's profile.

Every statement is a number read off the two profiles (no model writes it), so cards are
reproducible and diff well: what the harness fixes (failure outcomes it reduces), what it
rescues, what it costs (tokens and steps per rollout against the base), where it regresses.
"""

from __future__ import annotations

from ..records import Card, Profile

MIN_OUTCOME_DROP = 1  # an outcome counts as fixed when it drops by at least this many


def behavior_card(profile: Profile, base: Profile) -> Card:
    """``fixes``, ``rescues``, ``costs``, ``regresses`` (lists of short sentences) and
    ``summary`` (one line) for ``profile`` against the base profile."""
    if profile.harness.hash == base.harness.hash:
        return Card(summary=f"base harness: {100 * profile.success.rate:.1f}% success")
    fixes = []
    for outcome in sorted(set(profile.outcomes) | set(base.outcomes)):
        if outcome == "success":
            continue
        mine, theirs = profile.outcomes.get(outcome, 0), base.outcomes.get(outcome, 0)
        if theirs - mine >= MIN_OUTCOME_DROP:
            fixes.append((theirs - mine, f"{outcome} {theirs} -> {mine}"))
    fixes.sort(key=lambda f: (-f[0], f[1]))
    rescue = profile.rescue
    rescues = []
    if rescue.count:
        cats: dict[str, int] = {}
        for t in rescue.tasks:
            cats[t.category] = cats.get(t.category, 0) + 1
        where = ", ".join(f"{c} {n}" for c, n in sorted(cats.items(), key=lambda x: (-x[1], x[0])))
        rescues.append(f"rescues {rescue.count} of {rescue.opportunities} all-fail tasks ({where})")
    tok, base_tok = profile.tokens.mean, base.tokens.mean
    steps, base_steps = profile.steps.mean, base.steps.mean
    costs = [
        f"tokens/rollout {tok:.0f} vs {base_tok:.0f} ({_delta_pct(tok, base_tok)})",
        f"steps/rollout {steps:.2f} vs {base_steps:.2f}",
    ]
    regresses = []
    for cat, cell in profile.categories.items():
        ref = base.categories.get(cat)
        if ref and cell.rate < ref.rate:
            regresses.append(f"{cat} {100 * ref.rate:.0f}% -> {100 * cell.rate:.0f}%")
    if profile.regressed_tasks:
        shown = ", ".join(profile.regressed_tasks[:5])
        more = len(profile.regressed_tasks) - 5
        regresses.append(
            f"fails tasks the base always solved: {shown}" + (f" (+{more})" if more > 0 else "")
        )
    delta = profile.success.rate - base.success.rate
    fixed = ", ".join(f[1].split(" ")[0] for f in fixes[:2]) or "no failure outcome"
    summary = (
        f"{100 * profile.success.rate:.1f}% success ({100 * delta:+.1f} pts vs base); "
        f"reduces {fixed}; rescues {rescue.count}/{rescue.opportunities} all-fail tasks; "
        f"{_delta_pct(tok, base_tok)} tokens"
    )
    return Card(
        summary=summary,
        fixes=[f[1] for f in fixes],
        rescues=rescues,
        costs=costs,
        regresses=regresses,
    )


def _delta_pct(value: float, ref: float) -> str:
    if ref <= 0:
        return "n/a"
    return f"{100 * (value - ref) / ref:+.0f}%"
