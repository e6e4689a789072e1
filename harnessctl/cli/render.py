"""Console helpers shared by the commands (rich is cheap to import; tables are built here).

Text from outside (errors, model replies, harness output, task text, file names) reaches rich
only escaped (``escape``) or as ``Text``, never as markup: ``[ray]`` must print as itself and
a reply holding ``[/]`` must not crash the renderer.
"""

from __future__ import annotations

import functools
import os
from functools import lru_cache

from rich.console import Console
from rich.markup import escape

__all__ = [
    "console",
    "err_console",
    "escape",
    "handle_errors",
    "pct",
    "print_error",
    "print_result",
]


def _sized(c: Console) -> Console:
    # Piped output defaults to 80 columns, which folds harness names; logs read better wider.
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c.width = 120
    return c


@lru_cache(maxsize=1)
def console() -> Console:
    return _sized(Console(highlight=False))


@lru_cache(maxsize=1)
def err_console() -> Console:
    return _sized(Console(stderr=True, highlight=False))


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def print_result(result) -> None:
    """A command's typed result as ``--json`` prints it: exactly ``model_dump(mode="json")``."""
    import json

    console().print_json(json.dumps(result.model_dump(mode="json")))


def print_error(exc: BaseException) -> None:
    err_console().print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)


def handle_errors(func, exit_code: int | None = None):
    """Turn a HarnessctlError into a one-line message and its exit code (``exit_code`` when
    given: a command whose exit codes mean something else), without a traceback."""
    import typer

    from ..errors import HarnessctlError

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except HarnessctlError as exc:
            print_error(exc)
            raise typer.Exit(exit_code or getattr(exc, "exit_code", 1)) from None

    return wrapper
