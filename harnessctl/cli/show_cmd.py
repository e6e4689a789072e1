from __future__ import annotations

from typing import Annotated

import typer

from .options import StoreOption


def show_command(
    rollout_id: Annotated[str, typer.Argument(help="Rollout id or a unique prefix (>= 4).")],
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw trajectory.")] = False,
) -> None:
    """Render one rollout's trajectory: every model call, the action the harness took, the
    observation, and how the host scored the result."""
    from ..workspace import load_workspace
    from .render import console
    from .trajectory_view import render_trajectory

    db = load_workspace().open_store(store)
    row = db.rollout(rollout_id)
    trajectory = db.trajectory(row)
    if as_json:
        console().print_json(trajectory.model_dump_json())
        return
    render_trajectory(console(), row, trajectory)


def rollouts_command(
    harness: Annotated[str | None, typer.Option(help="Only this harness name.")] = None,
    task: Annotated[str | None, typer.Option(help="Only this task id.")] = None,
    outcome: Annotated[str | None, typer.Option(help="Only this outcome.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 20,
    store: StoreOption = None,
) -> None:
    """List recorded rollouts (newest first) with their ids, for `harnessctl show`."""
    from rich.table import Table
    from rich.text import Text

    from ..workspace import load_workspace
    from .render import console

    db = load_workspace().open_store(store)
    rows = [
        r
        for r in db.rollouts(task_id=task)
        if (harness is None or r.harness_name == harness)
        and (outcome is None or r.outcome == outcome)
    ]
    rows.sort(key=lambda r: r.created_at, reverse=True)
    table = Table(show_edge=False)
    for col in ("id", "harness", "task", "seed", "policy", "outcome", "steps"):
        table.add_column(col)
    for r in rows[:limit]:
        cells = (r.id[:12], r.harness_name, r.task_id, r.seed, r.policy_id, r.outcome, r.steps)
        table.add_row(*(Text(str(c)) for c in cells))
    console().print(table)
