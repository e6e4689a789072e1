from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


@contextmanager
def rollout_progress(console: Console, enabled: bool = True) -> Iterator:
    """A progress callback ``(event, done, total)`` backed by a rich progress bar."""
    if not enabled:
        yield None
        return
    bar = Progress(
        TextColumn("[bold]rollouts"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    task_id = None

    def update(event: str, done: int, total: int) -> None:
        nonlocal task_id
        if task_id is None:
            task_id = bar.add_task("rollouts", total=total)
        bar.update(task_id, completed=done, total=total)

    with bar:
        yield update
