"""Console helpers shared by the commands (rich is cheap to import; tables are built here).

Text from outside (errors, model replies, harness output, task text, file names) reaches rich
only escaped (``escape``) or as ``Text``, never as markup: ``[ray]`` must print as itself and
a reply holding ``[/]`` must not crash the renderer.
"""

from __future__ import annotations

import functools
import logging
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


class _WarningsToStderr(logging.Handler):
    """The library's warnings (``logging.getLogger("harnessctl...")``), each distinct one
    printed once to stderr as ``warning: ...``: a sandbox that fell back to no isolation must
    not be a line only the store knows."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text not in self.seen:
            self.seen.add(text)
            err_console().print(f"[bold yellow]warning:[/] {escape(text)}", soft_wrap=True)


def show_library_warnings() -> None:
    """Route the library's warnings to stderr, each distinct one once per command."""
    log = logging.getLogger("harnessctl")
    handler = next((h for h in log.handlers if isinstance(h, _WarningsToStderr)), None)
    if handler is None:
        log.addHandler(handler := _WarningsToStderr())
        log.setLevel(min(log.level or logging.WARNING, logging.WARNING))
    handler.seen.clear()


def handle_errors(func, exit_code: int | None = None):
    """Turn a HarnessctlError into a one-line message and its exit code (``exit_code`` when
    given: a command whose exit codes mean something else), without a traceback; the
    library's warnings go to stderr."""
    import typer

    from ..errors import HarnessctlError

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        show_library_warnings()
        try:
            return func(*args, **kwargs)
        except HarnessctlError as exc:
            print_error(exc)
            raise typer.Exit(int(exit_code or getattr(exc, "exit_code", 2) or 2)) from None
        except KeyboardInterrupt:
            err_console().print(
                "[yellow]interrupted:[/] everything finished is stored; run the same command "
                "again to resume"
            )
            raise typer.Exit(130) from None

    return wrapper
