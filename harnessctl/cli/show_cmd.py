from __future__ import annotations

from typing import Annotated

import typer

from .options import JsonOption, StoreOption


def show_command(
    rollout_id: Annotated[str, typer.Argument(help="Rollout id or a unique prefix (>= 4).")],
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw trajectory.")] = False,
) -> None:
    """Render one rollout's trajectory: every model call, the action the harness took, the
    observation, and how the host scored the result."""
    from ..workspace import load_workspace
    from .render import console, print_result
    from .trajectory_view import render_trajectory

    db = load_workspace().open_store(store)
    row = db.rollout(rollout_id)
    trajectory = db.trajectory(row)
    if as_json:
        print_result(trajectory)  # a Result: kind "trajectory", version, the record
        return
    render_trajectory(console(), row, trajectory)


def known_outcome(value: str | None) -> str | None:
    """An option callback: ``--outcome`` must name an outcome (an unknown one would only
    print an empty table)."""
    from ..outcomes import ALL_OUTCOMES

    if value is not None and value not in ALL_OUTCOMES:
        raise typer.BadParameter(f"{value!r} is not an outcome; one of: {', '.join(ALL_OUTCOMES)}")
    return value


def rollouts_command(
    harness: Annotated[str | None, typer.Option(help="Only this harness name.")] = None,
    task: Annotated[str | None, typer.Option(help="Only this task id.")] = None,
    outcome: Annotated[
        str | None, typer.Option(callback=known_outcome, help="Only this outcome.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 20,
    attempts: Annotated[
        bool,
        typer.Option(
            "--attempts",
            help="List the infra-failed attempts instead (retried, never task outcomes), "
            "newest first with their errors; --harness, --task and --outcome do not apply.",
        ),
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List recorded rollouts (newest first) with their ids, for `harnessctl show`."""
    from ..summary import AttemptItem, RolloutListRecord
    from ..workspace import load_workspace
    from .render import print_result

    db = load_workspace().open_store(store)
    if attempts:
        found = sorted(db.attempts(), key=lambda a: a.created_at, reverse=True)[:limit]
        record = RolloutListRecord(
            attempts=[AttemptItem.model_validate(a.model_dump()) for a in found]
        )
    else:
        rows = [
            r
            for r in db.rollouts(task_id=task)
            if (harness is None or r.harness_name == harness)
            and (outcome is None or r.outcome == outcome)
        ]
        rows.sort(key=lambda r: r.created_at, reverse=True)
        record = RolloutListRecord(rollouts=[_item(r) for r in rows[:limit]])
    if as_json:
        print_result(record)
    else:
        _render_list(record, attempts=attempts)


def _item(row):
    from ..summary import RolloutItem

    return RolloutItem(
        id=row.id,
        run_id=row.run_id,
        harness=row.harness_name,
        harness_hash=row.harness_hash,
        task=row.task_id,
        seed=row.seed,
        policy=row.policy_id,
        outcome=row.outcome,
        success=row.success,
        steps=row.steps,
        created_at=row.created_at,
        origin=row.origin,
    )


def _render_list(record, *, attempts: bool) -> None:
    from rich.table import Table

    from .render import console, text

    table = Table(show_edge=False)
    if attempts:
        for col in ("attempt", "run", "outcome", "error"):
            table.add_column(col)
        for a in record.attempts:
            table.add_row(*(text(c) for c in (a.id[:12], a.run_id[:12], a.outcome, a.error)))
    else:
        # Names and task ids fold rather than end in an ellipsis: `show`, `route --task` and
        # `compare` need them whole (ALFWorld's run to 65 characters); the rest stay on a line.
        cached = any(r.origin for r in record.rollouts)  # copied from a read-through cache
        columns = ("id", "harness", "task", "seed", "policy", "outcome", "steps")
        for col in columns + (("from cache",) if cached else ()):
            folds = col in ("harness", "task", "policy", "from cache")
            width = 4 if folds else None
            table.add_column(col, overflow="fold", no_wrap=not folds, min_width=width)
        for r in record.rollouts:
            cells = (r.id[:12], r.harness, r.task, r.seed, r.policy, r.outcome, r.steps)
            table.add_row(*(text(c) for c in cells + ((r.origin,) if cached else ())))
    console().print(table)
