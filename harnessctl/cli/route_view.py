"""Output of ``harnessctl route`` and of ``harnessctl eval --router``."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .render import escape, pct, text


def render_route(console: Console, result) -> None:
    console.print(
        text(
            f"task {result.task_id} ({result.category}), failures: "
            + ", ".join(result.failure_outcomes)
        )
    )
    table = Table(title=f"top {result.k}", show_edge=False)
    for col in ("rank", "harness", "score", "profile", "reasons"):
        table.add_column(col, overflow="fold")
    for i, c in enumerate(result.top, 1):
        table.add_row(
            str(i),
            text(c.name),
            f"{c.score:g}",
            f"{c.profile_score:.3f}",
            text("; ".join(c.reasons)),
        )
    console.print(table)
    if result.evidence is not None:
        console.print(text(result.evidence.describe()))
    elif result.profile_splits:  # ranked from profiles given, not read from a store
        splits = sorted(set(result.profile_splits.values()))
        console.print(text(f"ranked by profiles on split {', '.join(splits)}"))
    if result.in_sample:
        console.print(
            text(
                "IN-SAMPLE: this task is in the profiles' evidence (their rescues count it); "
                "profile on another split (`harnessctl profile --split`) for an honest ranking"
            )
        )
    for v in result.votes:
        status = "ok: " + ", ".join(v.ranking) if v.ok else f"ignored ({v.error})"
        console.print(text(f"voter {v.model}: {status}"))


def render_routed(console: Console, spec, request, result) -> None:
    b, r = result.base, result.routed
    how = (
        "every task routed from its category before any rollout (no verifier)"
        if result.when == "before"
        else "tasks the base failed routed from its failures (VERIFIER ACCESS: the routed "
        "side read the base's verdicts)"
    )
    console.print(
        f"[bold]Rank-1 routed eval[/] of {escape(spec.name)} on "
        f"{escape(request.suite.name)}/{escape(request.split)}, "
        f"{result.rollouts} rollouts per task on both sides; {how}",
        soft_wrap=True,
    )
    table = Table(show_edge=False)
    for col in ("", "success", "95% CI", "successes"):
        table.add_column(col)
    for label, s in (("base", b), ("routed", r)):
        table.add_row(
            label,
            pct(s.success_rate),
            f"{pct(s.ci95[0])}-{pct(s.ci95[1])}",
            f"{s.successes}/{s.rollouts}",
        )
    console.print(table)
    if result.evidence is not None:  # the same line `route` prints: the router's evidence
        console.print(text(result.evidence.describe()))
    d = result.to_dict()
    console.print(
        text(
            f"delta {100 * d['delta']:+.1f} pts; {d['routed_tasks']} task(s) routed: "
            + ", ".join(f"{n} x{c}" for n, c in d["chosen_counts"].items())
            + f"; rollouts spent: base {b.rollouts}, routed side {d['routed_side_rollouts']}"
        )
    )
    informed = ", ".join(f"{k} on {'/'.join(v)}" for k, v in d["informed_by"].items() if v)
    if d["in_sample_tasks"]:
        console.print(
            f"[bold yellow]IN-SAMPLE:[/] {len(d['in_sample_tasks'])} of {d['tasks']} judged "
            f"tasks informed what is compared ({escape(informed)}); this delta overstates "
            "routing. Judge on a split none of them used (e.g. --split test).",
            soft_wrap=True,
        )
    else:
        console.print(
            escape(f"out-of-sample: none of the {d['tasks']} judged tasks informed {informed}"),
            soft_wrap=True,
        )
