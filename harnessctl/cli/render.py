"""Console helpers shared by the commands (rich is cheap to import; tables are built here)."""

from __future__ import annotations

import os
from functools import lru_cache

from rich.console import Console


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


def handle_errors(func):
    """Turn a HarnessctlError into a one-line message and its exit code (no traceback)."""
    import functools

    import typer

    from ..errors import HarnessctlError

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except HarnessctlError as exc:
            err_console().print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(getattr(exc, "exit_code", 1)) from None

    return wrapper
