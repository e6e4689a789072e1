from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


@contextmanager
def rollout_progress(
    console: Console, enabled: bool = True, what: str = "rollouts", events: bool = False
) -> Iterator:
    """A progress callback ``(event, done, total)`` counting ``what``: a live rich progress
    bar on a terminal, plain lines when not (a log, a CI job, ``--json`` piped: the
    console is stderr's, so stdout stays pure JSON). A ``start LABEL`` event names the work
    that follows (``evolve-judge: dbbench-base.termination.r1``): the bar shows it."""
    if not enabled:
        yield None
        return
    if events:  # --json: one JSON object a line on stderr, for a program to follow
        yield json_progress(console, what=what)
        return
    if not console.is_terminal:  # a log file or a CI job: plain lines, now and then
        yield plain_progress(console, what=what)
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    task_id = None

    def update(event: str, done: int, total: int) -> None:
        nonlocal task_id
        label = _label(event)
        described = f"{label} {what}" if label else what
        if task_id is None:
            task_id = bar.add_task(described, total=total)
        if label:
            bar.update(task_id, description=described)
        bar.update(task_id, completed=done, total=total)

    with bar:
        yield update


PLAIN_EVERY_S = 10.0
"""How often plain progress prints a line when output is not a terminal."""


def plain_progress(
    console: Console,
    every_s: float = PLAIN_EVERY_S,
    clock: Callable[[], float] = time.monotonic,
    what: str = "rollouts",
) -> Callable[[str, int, int], None]:
    """A progress callback that prints ``rollouts N/M (P%), Ts elapsed`` (``what`` in place
    of rollouts) at the start, at most every ``every_s`` seconds, and when the last is done."""
    started = clock()
    last = [-every_s]
    named = [""]

    def update(event: str, done: int, total: int) -> None:
        now = clock() - started
        label = _label(event)
        if label:
            named[0] = f"{label} "
        if not event.startswith("start") and done < total and now - last[0] < every_s:
            return
        last[0] = now
        share = 100 * done / total if total else 100.0
        line = f"{named[0]}{what} {done}/{total} ({share:.0f}%), {now:.0f}s elapsed"
        console.print(line, highlight=False, markup=False)

    return update


def json_progress(
    console: Console, what: str = "rollouts", clock: Callable[[], float] = time.monotonic
) -> Callable[[str, int, int], None]:
    """A progress callback that prints every event as one JSON line: ``{"kind": "progress",
    "work": LABEL, "what": "rollouts", "done": N, "total": M, "elapsed_s": T}``."""
    import json

    started = clock()
    named = [""]

    def update(event: str, done: int, total: int) -> None:
        label = _label(event)
        if label:
            named[0] = label
        line = {
            "kind": "progress",
            "work": named[0],
            "what": what,
            "done": done,
            "total": total,
            "elapsed_s": round(clock() - started, 3),
        }
        console.file.write(json.dumps(line) + "\n")
        console.file.flush()

    return update


def _label(event: str) -> str:
    """The work a ``start LABEL`` event names ('' for any other event)."""
    return event[len("start ") :].strip() if event.startswith("start ") else ""


@contextmanager
def stage(console: Console, text: str) -> Iterator[None]:
    """Progress of a step that has no count (reading the store, rendering a report): a
    spinner on a terminal, else a line when it starts and one when it ends, with its time."""
    started = time.monotonic()
    if console.is_terminal:
        with console.status(text):
            yield
        return
    console.print(f"{text}...", highlight=False)
    yield
    console.print(f"{text}: done in {time.monotonic() - started:.1f}s", highlight=False)
