"""``harnessctl profile``'s output: the profiles, the rescue matrix, re-anchoring drift."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from .render import console, escape, pct, print_result, print_table, reproduced, text

if TYPE_CHECKING:
    from ..records import RescueMatrix


def render_profiles(pool, drift, policy_id: str, *, as_json: bool) -> None:
    """``pool`` (a ``PoolProfiles``) and, after --reanchor, ``drift`` (a ``ReanchorResult``)."""
    if as_json:
        from ..results import ProfilesResult

        print_result(ProfilesResult(**profiles_payload(pool, drift, policy_id)))
        return
    render_pool(console(), pool, policy_id)
    if drift is not None:
        render_drift(console(), drift)


def profiles_payload(pool, drift, policy_id: str) -> dict:
    payload = {
        "base": pool.base,
        "policy": policy_id,
        "profiles": {name: p.dump() for name, p in pool.profiles.items()},
        "profile_ids": pool.profile_ids,
        "matrix": pool.matrix.model_dump(mode="json"),
        "paths": [str(p) for p in pool.paths],
    }
    if drift is not None:
        payload["reanchor"] = {
            "anchor_policy": drift.anchor_policy,
            "policy": drift.policy,
            "sample": drift.sample,
            "drift": [d.to_dict() for d in drift.drift],
        }
    return payload


def render_pool(console: Console, pool, policy_id: str) -> None:
    table = Table(
        title=escape(f"behavior profiles ({policy_id}), base {pool.base}"), show_edge=False
    )
    # "all-fail tasks rescued": tasks every base rollout failed that this harness solved at
    # least once (the card says the same); tokens are means, as the card compares means
    # "reproduce": its edit's claimed rescues re-tested where its parent fails
    # afresh (evolve measures it when it accepts the edit)
    cols = ("harness", "success", "95% CI", "all-fail tasks rescued", "reproduce")
    for col in (*cols, "tokens mean", "card"):
        table.add_column(col, overflow="fold")
    for name in sorted(pool.profiles):
        p = pool.profiles[name]
        lo, hi = p.success.ci95
        table.add_row(
            text(name),
            pct(p.success.rate),
            f"{pct(lo)}-{pct(hi)}",
            "-" if name == pool.base else f"{p.rescue.count}/{p.rescue.opportunities}",
            reproduce_cell(p.harness.reproduction),
            f"{p.tokens.mean:.0f}",
            text(p.card.summary if p.card else ""),
        )
    print_table(console, table, names=("harness",))
    if any(_unreproduced(p.harness.reproduction) for p in pool.profiles.values()):
        console.print(
            "UNREPRODUCED: its claimed rescues reproduce no better than its parent tried again "
            "(null); export-pool leaves it out unless --include-unreproduced.",
            soft_wrap=True,
        )
    render_matrix(console, pool.matrix)
    for path in pool.paths:
        console.print(text(f"wrote {path}"))


def _unreproduced(summary: dict | None) -> bool:
    from ..evolve.reproduce import verdict_of

    return verdict_of(summary) == "unreproduced"


def reproduce_cell(summary: dict | None) -> str:
    """A reproduction summary in a table cell, ``UNREPRODUCED`` after it where its rescues
    reproduce no better than the null baseline (:func:`..evolve.reproduce.verdict_of`)."""
    said = reproduced(summary)
    return f"{said} UNREPRODUCED" if _unreproduced(summary) else said


def render_matrix(console: Console, m: RescueMatrix) -> None:
    if not m.harnesses:
        return
    grid = Table(title="rescue matrix (all-fail tasks both rescue)", show_edge=False)
    grid.add_column("harness")
    for i, _ in enumerate(m.harnesses):
        grid.add_column(f"#{i + 1}", justify="right")
    grid.add_column("unique", justify="right")
    for i, a in enumerate(m.harnesses):
        cells = [str(m.overlap[a][b]) for b in m.harnesses]
        grid.add_row(text(f"#{i + 1} {a}"), *cells, str(len(m.unique[a])))
    print_table(console, grid, names=("harness",))
    console.print(
        f"union of all-fail tasks rescued: {m.union_size} tasks; "
        f"largest single harness: {m.largest_single}"
    )


def render_drift(console: Console, result) -> None:
    console.print(
        text(f"re-anchored {result.anchor_policy} -> {result.policy} on {len(result.sample)} tasks")
    )
    table = Table(title="drift (new - old, 95% Newcombe interval)", show_edge=False)
    for col in ("harness", "success old", "success new", "delta", "rescue delta", "drifted"):
        table.add_column(col)
    for d in result.drift:
        so, sn = d.success_old, d.success_new
        delta, lo, hi = d.success_delta
        rescue = "-"
        if d.rescue_delta is not None:
            rd, rlo, rhi = d.rescue_delta
            rescue = f"{100 * rd:+.1f} [{100 * rlo:+.1f}, {100 * rhi:+.1f}]"
        table.add_row(
            text(d.harness),
            f"{so[0]}/{so[1]}",
            f"{sn[0]}/{sn[1]}",
            text(f"{100 * delta:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"),
            text(rescue),
            "yes" if d.drifted else "no",
        )
    print_table(console, table, names=("harness",))
