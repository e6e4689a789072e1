"""``harnessctl evolve``'s output: progress lines, the sibling table and lineage tree, or JSON."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from .profile_view import reproduce_cell
from .render import console, err_console, escape, pct, print_result, print_table, text
from .status import active_status


def direction_log(enabled: bool):
    """The engine's ``log(direction, message)``: a line on stderr, or nothing."""

    def log(direction: str, message: str) -> None:
        if enabled:
            who = escape(direction or "evolve")
            err_console().print(f"[bold cyan]{who}[/] {escape(message)}")
            status = active_status()
            if status is not None:  # the heartbeat names the engine's latest step
                first = (message.strip().splitlines() or [""])[0][:120]
                status.touch(f"{direction or 'evolve'}: {first}")

    return log


def render_evolve_result(base, result, *, split: str, as_json: bool) -> None:
    if as_json:
        print_result(result.record())
    else:
        render_evolve(console(), base, result, split)


def _gate_notes(console: Console, result) -> None:
    """What the gate that ran controlled: error control, the split guard, the budget, the
    workspace's earlier judgements."""
    if result.error_control:
        console.print(f"error control: {escape(result.error_control)}", soft_wrap=True)
    if result.guard:
        console.print(f"split guard: {escape(result.guard)}", soft_wrap=True)
    if result.budget:
        from ..evolve.power import Budget

        console.print(escape(Budget.model_validate(result.budget).text()), soft_wrap=True)
    if result.history:
        from ..evolve.history import History

        console.print(escape(History.model_validate(result.history).text()), soft_wrap=True)


def _lineage(base, result) -> Tree:
    """The accepted variants as a tree under the base."""
    tree = Tree(f"[bold]{escape(base.name)}[/]")
    nodes = {base.name: tree}
    for v in result.variants:
        parent = nodes.get(v.parent, tree)
        label = (
            f"{escape(v.name)} [dim]({escape(v.direction)}, edit {escape(v.edit_id[:8])}, "
            f"rescues reproduce {escape(reproduce_cell(v.reproduction))})[/]"
        )
        nodes[v.name] = parent.add(label)
    return tree


def render_evolve(console: Console, base, result, split: str) -> None:
    table = Table(
        title=f"evolve {result.evolve_id} from {escape(base.name)} "
        f"(base success {pct(result.base_success)})",
        show_edge=False,
    )
    # measured on the evolve's split, against the base, per (task, seed) pair: the split the
    # edits were chosen on, so these are in-sample figures (profile on another split)
    cols = ("variant", "direction", "pair rescues", "pair regressions", "success")
    for col in (*cols, "reproduce", "editor cost"):
        left = col in ("variant", "direction")
        table.add_column(col, justify="left" if left else "right", overflow="fold")
    for v in result.best.values():
        table.add_row(
            text(v.name),
            text(v.direction),
            str(v.rescues),
            str(v.regressions),
            pct(v.success_rate),
            reproduce_cell(v.reproduction),
            f"${v.cost_usd:.4f}",
        )
    print_table(console, table, names=("variant", "direction"))
    _gate_notes(console, result)
    largest = max((v.rescues for v in result.best.values()), default=0)
    console.print(
        f"union of pair rescues vs the base: {result.union_rescues} (task, seed) pairs "
        f"(largest single sibling: {largest}); in-sample: measured on {escape(split)}, the "
        "split the edits were judged on. For held-out figures, `harnessctl profile` the "
        "siblings on another split.",
        soft_wrap=True,
    )
    console.print(
        "reproduce: the claimed rescues of each accepted edit re-tested where its parent "
        "fails afresh (fresh seeds, held-out tasks of the same categories); null: the parent "
        "alone tried again on the same tasks, the rate a harness no better than it would show; "
        "UNREPRODUCED: no better than that (export-pool leaves it out unless "
        "--include-unreproduced).",
        soft_wrap=True,
    )
    accepted = sum(1 for e in result.edits if e.accepted)
    rejected = sum(1 for e in result.edits if e.status == "rejected")
    console.print(
        f"edits: {len(result.edits)} proposed, {accepted} accepted, "
        f"{rejected} rejected by validation"
    )
    console.print(_lineage(base, result))
    if result.stopped:
        console.print(f"[yellow]stopped early: {escape(str(result.stopped))}[/]")
