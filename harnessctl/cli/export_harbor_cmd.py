"""``harnessctl export-harbor``: a suite's split as Harbor task folders (docs/harbor.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import JsonOption


def export_harbor_command(
    suite: Annotated[Path, typer.Argument(help="Suite directory or suite.yaml.")],
    out: Annotated[Path, typer.Option(help="Directory to write the task folders into.")],
    split: Annotated[str, typer.Option(help="The split to export.")] = "dev",
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Only this task id (repeatable).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Write a suite's split as Harbor task folders (instruction.md, task.toml, environment/,
    tests/, solution/), one per task, for `harbor run -p OUT`. The verifier gives the
    environment's own verdict; an answer goes to /logs/agent/answer.txt. Only environments
    with a Harbor exporter can be exported (os_interaction)."""
    from ..harbor import export_suite
    from ..suite import load_suite
    from .render import console, err_console, print_result, text

    result = export_suite(load_suite(suite), split, out, task)
    for problem in result.problems:
        err_console().print(text(("skipped ", "yellow"), problem), soft_wrap=True)
    if as_json:
        print_result(result)
        return
    for exported in result.tasks:
        for caveat in exported.caveats:
            err_console().print(
                text(("note ", "yellow"), f"{exported.id}: {caveat}"), soft_wrap=True
            )
    console().print(
        text(
            f"{len(result.tasks)} task folder(s) of {result.suite}/{result.split} written to "
            f"{result.out} (answers go to {result.answer_file}; harnessctl-export.json lists them)"
        ),
        soft_wrap=True,
    )
