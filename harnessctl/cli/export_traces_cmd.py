"""``harnessctl export-traces``: stored rollouts as OpenTelemetry GenAI traces (OTLP/JSON)
or Harbor ATIF trajectories (``harnessctl.traces``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import JsonOption, StoreOption

FORMAT_HELP = (
    "otel: one OTLP/JSON trace request (OpenTelemetry GenAI semantic conventions 1.44.0) "
    "in the file --out; atif: Harbor's ATIF (v1.7), one <rollout id>.json per rollout in "
    "the directory --out."
)


def export_traces_command(
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)],
    out: Annotated[Path, typer.Option(help="The file (otel) or directory (atif) to write.")],
    run: Annotated[
        str | None, typer.Option(help="Only the rollouts this run stands on (id or prefix).")
    ] = None,
    harness: Annotated[str | None, typer.Option(help="Only this harness name.")] = None,
    task: Annotated[str | None, typer.Option(help="Only this task id.")] = None,
    outcome: Annotated[str | None, typer.Option(help="Only this outcome.")] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="At most this many, newest first.")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export stored rollouts as traces other tools read: OpenTelemetry (Phoenix, MLflow,
    Langfuse, Weave: every model call a `chat` span, every tool call or environment step an
    `execute_tool` span) or Harbor's ATIF. Policy parameters stay redacted."""
    from ..traces import export_traces, select_rollouts
    from ..workspace import load_workspace
    from .render import console, err_console, print_result, text

    ws = load_workspace()
    db = ws.open_store(store)
    rows = select_rollouts(
        ws, db, run=run, harness=harness, task=task, outcome=outcome, limit=limit
    )
    result = export_traces(db, rows, fmt, out)
    if as_json:
        print_result(result)
    else:
        console().print(
            text(f"{result.rollouts} rollout(s) written as {fmt} ({result.spec}) to {out}")
        )
    for rollout, why in result.skipped.items():
        err_console().print(text(("skipped ", "yellow"), f"{rollout}: {why}"), soft_wrap=True)
    for warning in result.warnings:
        err_console().print(text(("warning: ", "yellow"), warning), soft_wrap=True)
