"""Console helpers shared by the commands (rich is cheap to import; tables are built here).

Text from outside (errors, model replies, harness output, task text, file names) reaches rich
only through :func:`escape` (inside markup) or :func:`text` (a ``Text``), never as markup:
``[ray]`` must print as itself and a reply holding ``[/]`` must not crash the renderer. Both
pass it through :func:`terminal_safe` first, so no control sequence a harness or a model
wrote (a window title, a clipboard write, a cleared screen, fake colours) reaches the
terminal. The commands import neither ``rich.text.Text`` nor ``rich.markup.escape``
themselves (tests/report/test_hostile_display.py checks it).
"""

from __future__ import annotations

import functools
import logging
import os
from functools import lru_cache
from typing import Any

from rich.console import Console
from rich.markup import escape as _markup_escape
from rich.text import Text

from .safe_text import terminal_safe, text

__all__ = [
    "console",
    "err_console",
    "escape",
    "handle_errors",
    "pct",
    "print_error",
    "print_json_text",
    "print_result",
    "print_table",
    "terminal_safe",
    "text",
]


def escape(value: Any) -> str:
    """Untrusted ``value`` for a rich markup string: control sequences removed, markup
    escaped."""
    return _markup_escape(terminal_safe(value))


def shown(markup: str) -> str:
    """The text a markup string shows (its tags gone, escapes undone): a markup label given to
    a plain-text sink, such as the status line's heartbeat."""
    return Text.from_markup(markup).plain


def _sized(c: Console) -> Console:
    # COLUMNS read from os.environ as it is now: rich reads the mapping it found at import,
    # and a library that replaces os.environ (datasets' multiprocess map does) would leave
    # it stale. Piped output defaults to 80 columns, which folds harness names; logs read
    # better wider.
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        c.width = int(columns)
    elif not c.is_terminal:
        c.width = 120
    return c


def console() -> Console:
    """The console of a command's result (stdout). Asking for it ends the command's status
    line: a spinner must not redraw beside a table on the same terminal."""
    from .status import result_ahead

    result_ahead()
    # Not cached: the width follows COLUMNS when the output is made (a long-lived process,
    # a test runner, may change it between commands).
    return _sized(Console(highlight=False))


@lru_cache(maxsize=1)
def err_console() -> Console:
    return _sized(Console(stderr=True, highlight=False))


PROSE_COLUMNS = 20
"""Off a terminal, a wrapping column (a card, a note) is this wide at least when a table grows
past COLUMNS for its names: a few words a line, not one."""


def print_table(console: Console, table: Any, names: tuple[str, ...] = ()) -> None:
    """Print ``table`` with the cells of its ``names`` columns (harness, variant, task and
    category names: what a reader copies into the next command) whole. On a terminal they fold
    at its width rather than end in an ellipsis. Anywhere else (a pipe, a log) a name is never
    split: those columns do not wrap and the table takes the width they need, past COLUMNS
    if it must (a pipe has no width to keep, and a name broken over two lines is one that
    grep and copy-paste miss); the other columns still wrap, at spaces, no word split either.
    ``--json`` is the form for programs; a hint to use it would not mend the table."""
    columns = [c for c in table.columns if c.header in names]
    for column in columns:
        column.overflow = "fold"
    if console.is_terminal or not columns:
        console.print(table)
        return
    from rich.measure import Measurement

    wide = console.options.update_width(1 << 16)
    wrapping = []
    for column in table.columns:
        sizes = [Measurement.get(console, wide, cell) for cell in (column.header, *column.cells)]
        low, high = max(m.minimum for m in sizes), max(m.maximum for m in sizes)
        if column in columns:
            column.no_wrap, column.min_width = True, high
        else:
            wrapping.append((low, high))
    # rich narrows the widest wrapping columns first, down to one level for all: that level
    # must hold the longest word of every one of them (and a few words of prose a line)
    level = max((low for low, _ in wrapping), default=0)
    level = max(level, PROSE_COLUMNS)
    need = Measurement.get(console, wide, table).minimum
    need += sum(min(high, level) - low for low, high in wrapping)
    width = console.width
    console.width = max(width, need)
    try:
        console.print(table)
    finally:
        console.width = width


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def print_result(result) -> None:
    """A command's typed result as ``--json`` prints it: exactly ``model_dump(mode="json")``."""
    import json

    print_json_text(json.dumps(result.model_dump(mode="json")))


#: Past this size a JSON document is printed by ``json`` itself: rich's highlighter took
#: minutes on a trajectory of a few MB, with the same text as the result.
PLAIN_JSON_BYTES = 1 << 20


def print_json_text(data: str) -> None:
    """Print a JSON document, every non-ASCII character as a ``\\u`` escape: JSON escapes
    control characters below 0x20, this also the C1 ones (0x80-0x9f) a terminal may obey."""
    if len(data) > PLAIN_JSON_BYTES:
        import json
        import sys

        from .status import result_ahead

        result_ahead()

        sys.stdout.write(json.dumps(json.loads(data), indent=2, ensure_ascii=True) + "\n")
        sys.stdout.flush()
        return
    console().print_json(data, ensure_ascii=True)


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
    library's warnings go to stderr; a long command shows its status line while it runs
    (:mod:`.status`: ended before an error prints)."""
    import typer

    from ..errors import HarnessctlError

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from .status import command_status

        show_library_warnings()
        try:
            with command_status(func.__name__, err_console(), as_json=bool(kwargs.get("as_json"))):
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


def reproduced(summary: dict | None) -> str:
    """``a/n f% (null b/m)`` of a reproduction summary (null: the parent alone tried again,
    the chance baseline, where measured); ``-`` when none was measured or testable."""
    if not summary or not summary.get("tested"):
        return "-"
    said = f"{summary['reproduced']}/{summary['tested']} {pct(summary['fraction'])}"
    null = summary.get("null")
    if isinstance(null, list) and len(null) == 2 and null[1]:
        said += f" (null {null[0]}/{null[1]})"
    return said
