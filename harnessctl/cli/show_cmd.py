from __future__ import annotations

from typing import Annotated

import typer

from .options import JsonOption, StoreOption


def show_command(
    ref: Annotated[
        str,
        typer.Argument(metavar="ID", help="A rollout's or a run's id, or a unique prefix (>= 4)."),
    ],
    store: StoreOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the raw trajectory (a run: its record).")
    ] = False,
) -> None:
    """Render one rollout's trajectory: every model call, the action the harness took, the
    observation, and how the host scored the result. Given a run's id: the run (its
    selection, its policy with its parameters, its figures) and the runs it made (a test's
    evaluations, an evolve's judgements and re-tests)."""
    from ..errors import HarnessctlError
    from ..runs import run_result
    from ..workspace import load_workspace
    from .render import console, print_result
    from .trajectory_view import render_trajectory

    db = load_workspace().open_store(store)
    run = _run_named(db, ref)
    if run is not None:
        result = run_result(db, run)
        if as_json:
            print_result(result)
        else:
            render_run(result)
        return
    try:
        row = db.rollout(ref)
    except HarnessctlError as exc:  # the id may have been meant as a run's: say so
        raise HarnessctlError(
            f"{exc}, nor a run (`harnessctl rollouts` and `harnessctl runs` list their ids)"
        ) from None
    trajectory = db.trajectory(row)
    if as_json:
        print_result(trajectory)  # a Result: kind "trajectory", version, the record
        return
    render_trajectory(console(), row, trajectory)


def _run_named(db, ref: str):
    """The run ``ref`` names, or None when it names none (then it is a rollout's id). Run
    and rollout ids are alike (uuid4 hex): a prefix of both is refused, not guessed."""
    from ..errors import HarnessctlError
    from ..runs import matching_runs

    runs = matching_runs(db, ref) if len(ref.strip()) >= 4 else []
    if len(runs) > 1:
        raise HarnessctlError(f"run id {ref!r} is ambiguous: {len(runs)} runs start with it")
    if not runs:
        return None
    try:
        rollout = db.rollout(ref)
    except HarnessctlError:  # no rollout (or several): the run is the one it names
        return runs[0]
    raise HarnessctlError(
        f"{ref!r} starts both run {runs[0].id} and rollout {rollout.id}: give more characters"
    )


def render_run(result) -> None:
    """``show RUN``: the run's header lines, then the runs it made as a table."""
    import time

    from rich.table import Table

    from .render import console, pct, text

    def when(ts: float | None) -> str:
        return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))

    r, out = result.run, console()
    rate = "-" if r.success_rate is None else pct(r.success_rate)
    identity = f"  (identity {r.policy})" if r.policy != r.policy_label else ""
    out.print(text("run ", (r.id, "bold"), f"  {r.command}  {r.status}"))
    out.print(text(f"started {when(r.started_at)}  finished {when(r.finished_at)}"))
    out.print(text(f"harness {r.harness} ({r.harness_hash[:12]})  suite {r.suite}/{r.split}"))
    out.print(text(f"policy {r.policy_label}{identity}"))
    out.print(
        text(
            f"rollouts {r.rollouts}  success {rate}  tokens {r.prompt_tokens}+"
            f"{r.completion_tokens}  cost ${r.cost_usd:.4f}"
        )
    )
    if r.parent_id:
        out.print(text(f"made by run {r.parent_id[:12]} (harnessctl show {r.parent_id[:12]})"))
    if not result.children:
        return
    out.print(text(f"runs it made ({len(result.children)}, oldest first):"))
    table = Table(show_edge=False)
    for col in ("run", "command", "harness", "suite/split", "policy", "status"):
        table.add_column(col, overflow="fold")
    for col in ("rollouts", "success"):
        table.add_column(col, justify="right")
    for c in result.children:
        command = c.command + (f" (+{c.children})" if c.children else "")
        rate = "-" if c.success_rate is None else pct(c.success_rate)
        cells = (c.id[:12], command, c.harness, f"{c.suite}/{c.split}", c.policy_label)
        table.add_row(*(text(x) for x in (*cells, c.status, str(c.rollouts), rate)))
    out.print(table)


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
