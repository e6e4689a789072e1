from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def init_command(
    directory: Annotated[Path, typer.Argument(help="Directory to make a workspace.")] = Path("."),
    examples: Annotated[
        bool,
        typer.Option(
            help="Copy the bundled base harnesses (dbbench-base, dbbench-fc) and example suite."
        ),
    ] = True,
) -> None:
    """Make a workspace: a git repository with harnesses/, profiles/, harnessctl.yaml and the
    store in an ignored .harnessctl/."""
    from ..workspace import init_workspace
    from .render import console, escape

    ws = init_workspace(directory, examples=examples)
    console().print(f"workspace ready at [bold]{escape(str(ws.root))}[/]")
