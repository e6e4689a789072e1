from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import JsonOption


def init_command(
    directory: Annotated[Path, typer.Argument(help="Directory to make a workspace.")] = Path("."),
    examples: Annotated[
        bool,
        typer.Option(
            help="Copy the bundled base harnesses (every one under harnesses/) and example "
            "suites (examples/dbbench, the default; alfworld, os_interaction, tau2)."
        ),
    ] = True,
    as_json: JsonOption = False,
) -> None:
    """Make a workspace: a git repository with harnesses/, profiles/, harnessctl.yaml and the
    store in an ignored .harnessctl/."""
    from ..workspace import init_workspace
    from .render import console, escape

    ws = init_workspace(directory, examples=examples)
    if as_json:
        from ..results import InitResult
        from .render import print_result

        names = [p.name for p in ws.harness_dirs()]
        print_result(InitResult(root=str(ws.root), harnesses=names))
        return
    console().print(f"workspace ready at [bold]{escape(str(ws.root))}[/]")
