"""``harnessctl new-env NAME``: write an environment plugin package to fill in."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import JsonOption


def next_steps(root: Path, name: str, base: str) -> list[str]:
    """The commands that install the package and run it end to end, in order."""
    return [
        f"cd {root}",
        "pip install -e .",
        "harnessctl init . --no-examples",
        "pytest -q tests",
        f"harnessctl eval {base} --split dev --policy replay/{name}",
        f"harnessctl evolve {base} --rounds 1",
    ]


def new_env_command(
    name: Annotated[
        str, typer.Argument(help="The environment kind: a lower-case Python identifier.")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Directory to write (new or empty; default: ./NAME)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Write an environment plugin package to fill in: the kind (host-served, on the typed
    Environment base), a suite with train/dev/test splits, a base harness, sim/NAME and
    replay/NAME, repair directions with the rule-based editor's repairs, and tests. It runs
    as it stands once installed (pip install -e DIR); docs/environments.md walks through
    replacing its example."""
    from ..scaffold import new_env

    made = new_env(name, out)
    steps = next_steps(made.root, made.name, made.base)
    if as_json:
        from ..scaffold.result import NewEnvResult
        from .render import print_result

        result = NewEnvResult(
            name=made.name, root=str(made.root), base=made.base, files=made.files, next_steps=steps
        )
        print_result(result)
        return
    from .render import console, escape

    out_console = console()
    out_console.print(
        f"wrote [bold]{escape(str(made.root))}[/] ({len(made.files)} files)", soft_wrap=True
    )
    out_console.print("next:")
    for step in steps:
        out_console.print(f"  {escape(step)}", soft_wrap=True)
