from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from .render import pct


def render_evolve(console: Console, base, result) -> None:
    table = Table(
        title=f"evolve {result.evolve_id} from {base.name} "
        f"(base success {pct(result.base_success)})",
        show_edge=False,
    )
    for col in ("variant", "direction", "rescued", "regressed", "success", "editor cost"):
        left = col in ("variant", "direction")
        table.add_column(col, justify="left" if left else "right", overflow="fold")
    for v in result.best.values():
        table.add_row(
            v.name,
            v.direction,
            str(v.rescues),
            str(v.regressions),
            pct(v.success_rate),
            f"${v.cost_usd:.4f}",
        )
    console.print(table)
    largest = max((v.rescues for v in result.best.values()), default=0)
    console.print(
        f"union of rescues across siblings: {result.union_rescues} "
        f"(largest single sibling: {largest})"
    )
    accepted = sum(1 for e in result.edits if e.accepted)
    rejected = sum(1 for e in result.edits if e.status == "rejected")
    console.print(
        f"edits: {len(result.edits)} proposed, {accepted} accepted, "
        f"{rejected} rejected by validation"
    )
    tree = Tree(f"[bold]{base.name}[/]")
    nodes = {base.name: tree}
    for v in result.variants:
        parent = nodes.get(v.parent, tree)
        nodes[v.name] = parent.add(f"{v.name} [dim]({v.direction}, edit {v.edit_id[:8]})[/]")
    console.print(tree)
    if result.stopped:
        console.print(f"[yellow]stopped early: {result.stopped}[/]")
