"""A long command's status: from its start it names what is loading, and it is never silent
for more than a few seconds (issue #56).

Library code names its slow steps through :mod:`harnessctl.phases`; :class:`Status` is the
listener a long command installs (:func:`command_status`, from ``render.handle_errors``).
Anywhere but a terminal (a log, a CI job, ``--json``, whose stdout stays pure JSON) it prints
plain lines on stderr: that the command starts, each step once when it starts, and a
heartbeat naming the current step or the latest count whenever nothing was printed for
:data:`QUIET_S`. On a terminal it is a transient spinner line (under the rollout bar while
one runs, :mod:`.progress`) shown from the start, while a step runs and after a silence; a
prompt or any other text written to stderr first stops it, so a person always sees what
they are asked (the spinner comes back with the next step).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from rich.console import Console

from .safe_text import terminal_safe, text

if TYPE_CHECKING:
    from rich.progress import Progress

#: The commands that can run for minutes (by function name, as ``handle_errors`` gets them):
#: they show a status from their start. ``train-engineer`` shows its own bar.
LONG_COMMANDS = {
    "eval_command": "eval", "evolve_command": "evolve", "profile_command": "profile",
    "bench_command": "bench", "test_command": "test", "export_pool_command": "export-pool",
    "rescue_sim_command": "rescue-sim", "report_command": "report", "route_command": "route",
    "export_traces_command": "export-traces", "export_edits_command": "export-edits",
}  # fmt: skip
STARTING = "starting (loading harnessctl, the workspace and its store)"
"""What every long command does first (a second or more on a busy machine: the store's and
the records' imports), until the library names a step."""
QUIET_S = 2.5
"""The heartbeat after this long without a line (issue #56: never 5 s silent; the margin is
for a loaded machine: with five runnable processes a core, the heartbeat's thread was seen
to wait two seconds for its turn)."""
TICK_S = 0.2
_ACTIVE: ContextVar[Status | None] = ContextVar("harnessctl_status", default=None)


def active_status() -> Status | None:
    """The status of the command running in this context, if it is a long one."""
    return _ACTIVE.get()


@contextmanager
def command_status(
    func_name: str, console: Console, as_json: bool = False
) -> Iterator[Status | None]:
    """The status of the command ``func_name`` while it runs (None for a short command), on
    ``console`` (stderr's)."""
    command = LONG_COMMANDS.get(func_name)
    if command is None:
        yield None
        return
    from ..phases import listening

    status = Status(console, command, live=console.is_terminal and not as_json)
    token = _ACTIVE.set(status)
    try:
        with status, listening(status.phases):
            yield status
    finally:
        _ACTIVE.reset(token)


def result_ahead() -> None:
    """The command prints its result now: its status ends (no spinner beside a table)."""
    status = _ACTIVE.get()
    if status is not None:
        status.finish()


class Status:
    """One long command's status on ``console`` (see the module docstring); thread-safe."""

    def __init__(
        self,
        console: Console,
        command: str,
        *,
        live: bool,
        clock: Callable[[], float] = time.monotonic,
        quiet_s: float = QUIET_S,
    ) -> None:
        self.console, self.command, self.live = console, command, live
        self.clock, self.quiet_s = clock, quiet_s
        self.started = self.last = clock()
        self.stack: tuple[str, ...] = ()
        self.latest = ""  # the last count or log line, for the heartbeat between steps
        self.said = False  # terminal: anything shown yet (before it, "starting" spins)
        self.bar: Progress | None = None
        self._idle = self._paused = self._done = False
        self._shown: set[str] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="status", daemon=True)
        self._spinner: Any = None
        self._spinning: Any = None  # the spinner's transient Live (terminal)
        self._stderr: Any = None  # the real sys.stderr while ours watches it (terminal)

    def __enter__(self) -> Status:
        if self.live:
            self._watch_stderr()
            self._show()
        else:
            self._say(f"{self.command}: {STARTING}")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def finish(self) -> None:
        """Stop the spinner and the heartbeat (idempotent)."""
        with self._lock:
            self._done = True
            self._show()
            self._unwatch_stderr()
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    # --- what the command is doing ------------------------------------------------------
    def phases(self, stack: tuple[str, ...]) -> None:
        """The library's listener (:mod:`harnessctl.phases`): a new step prints once."""
        with self._lock:
            began = len(stack) > len(self.stack)
            self.stack, top = stack, (stack[-1] if stack else "")
            if self.live:
                self._paused = self._paused and not began
                self._moved()
            elif began and top not in self._shown and not self._done:
                self._shown.add(top)
                self._say(f"{self.command}: {top}...")

    def touch(self, doing: str = "") -> None:
        """A line was printed (``doing``: what it says is under way, for the heartbeat)."""
        with self._lock:
            self.latest = doing or self.latest
            self._moved()

    def attach(self, bar: Progress | None) -> None:
        """Show ``bar`` (a rollout bar; None: it ended) instead of the spinner's own line."""
        with self._lock:
            self.bar = bar
            self._moved()

    def pause(self) -> None:
        """Terminal: something else is written to stderr (a prompt): no spinner until the
        next step starts."""
        with self._lock:
            self._paused = True
            self._moved()

    def doing(self) -> str:
        """The current step, else the latest count, else that the command is starting."""
        if self.stack:
            return f"{self.command}: {self.stack[-1]}"
        return self.latest or f"{self.command}: {STARTING}"

    def tick(self) -> None:
        """The heartbeat, when it is due: a line, or on a terminal the spinner again."""
        with self._lock:
            now = self.clock()
            if self._done or now - self.last < self.quiet_s:
                return
            if not self.live:
                self._say(f"{self.doing()}, {now - self.started:.0f}s elapsed")
            elif self._spinning is None and self.bar is None and not self._paused:
                self._idle = True
                self._show()

    def _beat(self) -> None:
        while not self._stop.wait(TICK_S):
            self.tick()

    def _say(self, line: str) -> None:
        self.console.print(terminal_safe(line), markup=False, highlight=False, soft_wrap=True)
        self.last = self.clock()

    def _moved(self) -> None:
        self.last, self._idle = self.clock(), False
        self.said = self.said or bool(self.stack) or self.bar is not None
        self._show()

    # --- the terminal's spinner line ------------------------------------------------------
    def line(self) -> Any:
        """The spinner line while a step runs, before anything else showed or after a
        silence; None otherwise."""
        if self._done or self._paused or not (self.stack or not self.said or self._idle):
            return None
        from rich.spinner import Spinner

        self._spinner = self._spinner or Spinner("dots", style="cyan")
        self._spinner.update(text=text(f"{self.doing()} ({self.clock() - self.started:.0f}s)"))
        return self._spinner

    def _show(self) -> None:
        """Start or stop the spinner's Live: one live display at a time (rich < 14 refuses
        two), none while a bar runs (the bar shows the line). Not redirecting stdout: a
        piped result must not land on the terminal."""
        if not self.live:
            return
        wanted = self.bar is None and self.line() is not None
        if wanted and self._spinning is None:
            from rich.live import Live

            self._spinning = Live(get_renderable=lambda: self.line() or "", console=self.console,
                                  transient=True, refresh_per_second=8, redirect_stdout=False,
                                  redirect_stderr=False)  # fmt: skip
            self._spinning.start()
        elif not wanted and self._spinning is not None:
            self._spinning.stop()
            self._spinning = None

    def _watch_stderr(self) -> None:
        """rich writes to the real stderr, anything else through :class:`_Watched`."""
        if self.console.file is sys.stderr:
            self._stderr = sys.stderr
            self.console.file = self._stderr
            sys.stderr = _Watched(self._stderr, self)

    def _unwatch_stderr(self) -> None:
        if self._stderr is not None:
            if isinstance(sys.stderr, _Watched):
                sys.stderr = self._stderr
            self.console.file = None  # type: ignore[assignment]  # sys.stderr when printing
            self._stderr = None


class _Watched:
    """sys.stderr while a spinner may run: a write from anything but rich (a prompt, a
    library's own line) stops the spinner first, so the spinner never overwrites it."""

    def __init__(self, real: Any, status: Status) -> None:
        self._real, self._status = real, status

    def write(self, text: str) -> int:
        if text:
            self._status.pause()
        return self._real.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)
