"""Progress of a long command's counted work on stderr: a live bar on a terminal, plain lines
in a log or CI job, JSON lines under ``--json`` (stdout stays pure JSON). The command's status
line (:mod:`.status`) names what loads before the counts start and fills the silences."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from .render import escape
from .status import Status, active_status


class _Bar(Progress):
    """The rollout bar with the status's spinner line under it while a step runs."""

    status: Status | None = None

    def get_renderables(self):
        yield from super().get_renderables()
        line = self.status.line() if self.status is not None else None
        if line is not None:
            yield line


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
    bar = _Bar(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    bar.status = status = active_status()
    task_id = None
    named = [what]

    def update(event: str, done: int, total: int) -> None:
        nonlocal task_id
        label = _label(event)
        if label:
            named[0] = f"{label} {what}"
        described = escape(named[0])  # the description column is markup
        if task_id is None:
            task_id = bar.add_task(described, total=total)
        if label:
            bar.update(task_id, description=described)
        bar.update(task_id, completed=done, total=total)
        if status is not None:  # what a spinner after the bar says
            status.latest = f"{named[0]} {done}/{total}"

    if status is not None:
        status.attach(bar)
    try:
        with bar:
            yield update
    finally:
        if status is not None:
            status.attach(None)


PLAIN_EVERY_S = 10.0
"""How often plain progress prints a line when output is not a terminal (between them, the
command's status prints a heartbeat after :data:`QUIET_S` of silence)."""


def plain_progress(
    console: Console,
    every_s: float = PLAIN_EVERY_S,
    clock: Callable[[], float] = time.monotonic,
    what: str = "rollouts",
) -> Callable[[str, int, int], None]:
    """A progress callback that prints ``rollouts N/M (P%), Ts elapsed`` (``what`` in place
    of rollouts) at the start, at most every ``every_s`` seconds, and when the last is done."""
    status = active_status()
    # the command's clock when it has a status: its heartbeat and these lines then agree
    started = status.started if status is not None and status.clock is clock else clock()
    last = [-every_s]
    named = [""]

    def update(event: str, done: int, total: int) -> None:
        now = clock() - started
        label = _label(event)
        if label:
            named[0] = f"{label} "
        share = 100 * done / total if total else 100.0
        counted = f"{named[0]}{what} {done}/{total} ({share:.0f}%)"
        if not event.startswith("start") and done < total and now - last[0] < every_s:
            if status is not None:
                status.latest = counted  # the heartbeat's line says the latest count
            return
        last[0] = now
        console.print(f"{counted}, {now:.0f}s elapsed", highlight=False, markup=False)
        if status is not None:
            status.touch(counted)

    return update


def json_progress(
    console: Console, what: str = "rollouts", clock: Callable[[], float] = time.monotonic
) -> Callable[[str, int, int], None]:
    """A progress callback that prints every event as one JSON line: ``{"kind": "progress",
    "work": LABEL, "what": "rollouts", "done": N, "total": M, "elapsed_s": T}``."""
    import json

    started = clock()
    named = [""]
    status = active_status()

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
        if status is not None:
            status.touch(f"{named[0]} {what} {done}/{total}".strip())

    return update


def _label(event: str) -> str:
    """The work a ``start LABEL`` event names ('' for any other event)."""
    return event[len("start ") :].strip() if event.startswith("start ") else ""


@contextmanager
def stage(console: Console, text: str) -> Iterator[None]:
    """Progress of a step that has no count (reading the store, rendering a report): a
    spinner on a terminal (the command's status line when it has one), else a line when it
    starts and one when it ends, with its time. ``text`` is markup."""
    from ..phases import phase
    from .render import shown

    started = time.monotonic()
    status = active_status()
    plain = shown(text)
    if console.is_terminal:
        if status is not None and status.live:
            with phase(plain):
                yield
            return
        with console.status(text):
            yield
        return
    console.print(f"{text}...", highlight=False)
    if status is not None:
        status.touch(plain)
    yield
    console.print(f"{text}: done in {time.monotonic() - started:.1f}s", highlight=False)
