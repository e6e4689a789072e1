"""``harnessctl runs`` and ``harnessctl compare`` as terminal tables. Names, task ids and
outcomes are data: rendered as ``Text``, never as markup."""

from __future__ import annotations

import time

from rich.table import Table

from .render import console, pct, text


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def render_runs(result) -> None:
    if not result.runs:
        console().print("no runs in this store (`harnessctl eval` makes one)")
        return
    out = console()
    if not out.is_terminal:  # piped: whole names, however wide the table gets
        out.width = max(out.width, 240)
    table = Table(show_edge=False)
    for col in ("run", "started", "command", "harness", "suite/split", "policy", "status"):
        table.add_column(col, overflow="fold")
    for col in ("rollouts", "success", "cost $"):
        table.add_column(col, justify="right")
    for r in result.runs:
        rate = "-" if r.success_rate is None else pct(r.success_rate)
        command = r.command + (f" (+{r.children})" if r.children else "")
        cells = (
            r.id[:12],
            _when(r.started_at),
            f"  {command}" if r.parent_id else command,
            r.harness,
            f"{r.suite}/{r.split}",
            r.policy_label,  # readable: model key=value (--json keeps the identity too)
            r.status,
            str(r.rollouts),
            rate,
            f"{r.cost_usd:.4f}",
        )
        table.add_row(*(text(c) for c in cells))
    out.print(table)
    if any(r.children for r in result.runs):
        out.print("(+N): runs it made, folded; `harnessctl runs --all` lists them")


def render_compare(result, *, limit: int) -> None:
    out = console()
    for label, side in (("A", result.a), ("B", result.b)):
        out.print(
            text(
                f"{label}: ",
                (f"{side.harness} ", "bold"),
                f"run {side.id[:12]} {side.suite}/{side.split} {side.policy} ({side.status})",
            )
        )
    if not result.same_selection:
        out.print("[yellow]note:[/] the runs differ in suite, split or policy")
    if result.pairs == 0:
        out.print("no (task, seed) pair in common: nothing to compare")
        return
    ua, ub = result.a_usage, result.b_usage
    out.print(
        f"{result.pairs} paired rollouts ({result.only_a} only in A, {result.only_b} only in B): "
        f"A {pct(ua.success_rate)} -> B {pct(ub.success_rate)} "
        f"({100 * result.delta:+.1f} points)"
    )
    out.print(
        f"rescues {result.rescues}, regressions {result.regressions}; sign test "
        f"p(B better) = {result.p_b_better:.3g}, two-sided p = {result.p_two_sided:.3g}; "
        f"task level ({result.tasks} tasks, a task's seeds one cluster): two-sided p = "
        f"{result.p_two_sided_tasks:.3g}"
    )
    _tables(out, result, limit)


def _tables(out, result, limit: int) -> None:
    ua, ub = result.a_usage, result.b_usage
    usage = Table(title="paired usage", show_edge=False)
    for col in ("", "calls", "prompt tok", "completion tok", "cost $"):
        usage.add_column(col, justify="right")
    for label, u in (("A", ua), ("B", ub)):
        usage.add_row(
            label,
            str(u.model_calls),
            str(u.prompt_tokens),
            str(u.completion_tokens),
            f"{u.cost_usd:.4f}",
        )
    out.print(usage)
    cats = Table(title="by category", show_edge=False)
    for col in ("category", "pairs", "A", "B", "delta", "rescues", "regressions"):
        cats.add_column(col, justify="left" if col == "category" else "right")
    for name, c in result.categories.items():
        cats.add_row(
            text(name),
            str(c.pairs),
            str(c.a_successes),
            str(c.b_successes),
            f"{100 * c.delta:+.1f}",
            str(c.rescues),
            str(c.regressions),
        )
    out.print(cats)
    if result.changes and limit:
        changed = Table(title="changed pairs", show_edge=False)
        for col in ("change", "task", "seed", "A", "B", "A rollout", "B rollout"):
            changed.add_column(col, overflow="fold")
        for c in result.changes[:limit]:
            cells = (
                c.change,
                c.task,
                str(c.seed),
                c.a_outcome,
                c.b_outcome,
                c.a_rollout[:12],
                c.b_rollout[:12],
            )
            changed.add_row(*(text(x) for x in cells))
        out.print(changed)
        if len(result.changes) > limit:
            out.print(f"... {len(result.changes) - limit} more (--limit, or --json)")
