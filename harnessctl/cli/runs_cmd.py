"""``harnessctl runs`` and ``harnessctl compare``: the runs in the store, and two of them
side by side (``harnessctl.runs``, ``harnessctl.compare``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import JsonOption, StoreOption

RUN_STATUS_HELP = "Only runs with this status: running, done, failed, interrupted, died."


def runs_command(
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 20,
    status: Annotated[str | None, typer.Option(help=RUN_STATUS_HELP)] = None,
    everything: Annotated[
        bool,
        typer.Option(
            "--all", help="Every run, with those an evolve made (folded under it by default)."
        ),
    ] = False,
    harness: Annotated[str | None, typer.Option(help="Only runs of this harness.")] = None,
    command: Annotated[
        str | None, typer.Option(help="Only runs of this command (eval, evolve, profile...).")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only runs started on or after this date (YYYY-MM-DD).")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first: command, selection (harness, suite, split, policy and its
    parameters), status, rollouts, success and cost. The runs an evolve, a test, a profile or
    a bench made are folded under it (`+N`); `--all` lists them, `show RUN` one run's. Run
    ids (or 4+ character prefixes) go to `compare` and `show`."""
    from ..errors import ConfigError
    from ..runs import list_runs
    from ..store.models import RUN_STATUSES
    from ..workspace import load_workspace
    from .compare_view import render_runs
    from .render import print_result

    if status is not None and status not in RUN_STATUSES:
        raise ConfigError("--status", f"{status!r} is not one of {', '.join(RUN_STATUSES)}")
    start = None
    if since is not None:
        from datetime import datetime

        try:
            start = datetime.fromisoformat(since).timestamp()
        except ValueError:
            raise ConfigError("--since", f"{since!r} is not a date (YYYY-MM-DD)") from None
    db = load_workspace().open_store(store)
    result = list_runs(
        db,
        limit=limit,
        status=status,
        everything=everything,
        harness=harness,
        command=command,
        since=start,
    )
    if as_json:
        print_result(result)  # ``policy`` the identity, ``policy_params`` beside it
    else:
        render_runs(result)


def compare_command(
    a: Annotated[str, typer.Argument(help="Run A: a run id (prefix >= 4) or a harness name.")],
    b: Annotated[str, typer.Argument(help="Run B: a run id (prefix >= 4) or a harness name.")],
    split: Annotated[
        str | None, typer.Option(help="For a harness name: its latest run on this split.")
    ] = None,
    policy: Annotated[
        str | None, typer.Option(help="For a harness name: its latest run with this policy.")
    ] = None,
    suite: Annotated[
        str | None, typer.Option(help="For a harness name: its latest run on this suite.")
    ] = None,
    limit: Annotated[int, typer.Option(min=0, help="Changed pairs to list (table).")] = 20,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Compare two runs paired by (task, seed): outcome changes, rescues (A failed, B
    succeeded) and regressions, the exact sign test on them, per-category deltas, tokens and
    cost. A harness name stands for its latest finished run with --suite/--split/--policy."""
    from ..compare import compare_runs
    from ..runs import find_run, latest_run, split_task_ids
    from ..workspace import load_workspace
    from .compare_view import render_compare
    from .render import print_result

    ws = load_workspace()
    db = ws.open_store(store)
    names = {h.name for h in db.harnesses()}

    suite_name = suite
    if suite and (Path(suite).exists() or (ws.root / suite).exists()):
        suite_name = ws.load_suite(suite).name  # a suite directory as other commands take

    def resolve(ref: str):
        if ref in names:
            return latest_run(db, ref, suite=suite_name, split=split, policy=policy)
        return find_run(db, ref)

    run_a, run_b = resolve(a), resolve(b)
    result = compare_runs(db, run_a, run_b, (split_task_ids(ws, run_a), split_task_ids(ws, run_b)))
    if as_json:
        print_result(result)
    else:
        render_compare(result, limit=limit)
