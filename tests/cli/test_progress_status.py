"""A long command's status (issue #56): from its start it says what it is loading, and it is
never silent for long while an environment loads (tau2's took 33-43 s without a line).

The subprocess tests block the environment's task loading until the test releases it, and
read what the command printed meanwhile: the order of events and the heartbeat's presence
during a load, not wall-clock ratios, which a loaded machine would break. The heartbeat's
cadence is checked on a controlled clock.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from harnessctl.cli import status as status_mod
from harnessctl.cli.progress import plain_progress
from harnessctl.cli.render import err_console
from harnessctl.cli.status import QUIET_S, STARTING, TICK_S, Status
from harnessctl.phases import current, listening, phase

LOADING = "loading the tasks of suite dbbench-dev, split dev (dbbench)"
# the CLI with DBBench's task loading held until the file HX_TEST_RELEASE exists; as it
# starts, the load writes what stderr held then (HX_TEST_STDERR, when stderr is a file)
BLOCKED = """\
import os, sys, time
from pathlib import Path
from harnessctl.envs.dbbench import DBBenchEnvironment
real = DBBenchEnvironment.load_tasks
def held(self, path):
    seen = os.environ.get("HX_TEST_STDERR")
    Path(os.environ["HX_TEST_STARTED"]).write_text(Path(seen).read_text() if seen else "")
    release = Path(os.environ["HX_TEST_RELEASE"])
    while not release.exists():
        time.sleep(0.02)
    return real(self, path)
DBBenchEnvironment.load_tasks = held
from harnessctl.cli import app
app(sys.argv[1:], prog_name="harnessctl")
"""
EVAL = ["eval", "dbbench-base", "--rollouts", "1", "--task", "no-such-task"]


def _wait(predicate, what: str, limit_s: float = 120.0):
    """Poll ``predicate`` until it is true; the limit only turns a hang into a failure."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "HX_TEST_STARTED": str(tmp_path / "started"),
        "HX_TEST_RELEASE": str(tmp_path / "release"),
        **extra,
    }


def test_a_piped_command_names_its_load_before_it_starts_and_beats_while_it_blocks(
    workspace, tmp_path
):
    err = tmp_path / "stderr.txt"
    with err.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-c", BLOCKED, *EVAL],
            cwd=workspace, env=_env(tmp_path, HX_TEST_STDERR=str(err)),
            stdout=subprocess.PIPE, stderr=fh, text=True,
        )  # fmt: skip
        try:
            before = _wait(lambda: (tmp_path / "started").is_file(), "the load to start")
            assert before
            held = (tmp_path / "started").read_text().splitlines()
            # before the environment loads anything: that the command started, then what it
            # loads (printed as the step begins, not after it)
            assert held[:2] == [f"eval: {STARTING}", f"eval: {LOADING}..."], held
            # while the load blocks, the heartbeat keeps naming it, with the time so far
            beat = f"eval: {LOADING}, "
            _wait(lambda: err.read_text().count(beat) >= 2, "two heartbeats during the load")
        finally:
            (tmp_path / "release").write_text("")
            proc.wait(timeout=120)
    lines = err.read_text().splitlines()
    beats = [line for line in lines if line.startswith(beat)]
    assert all(line.endswith("s elapsed") for line in beats), beats
    assert proc.returncode == 2 and "no task 'no-such-task'" in err.read_text()
    assert proc.stdout is not None and proc.stdout.read() == ""  # stdout: the result's alone


def test_a_terminal_shows_the_load_on_its_spinner_line_and_keeps_redrawing_it(workspace, tmp_path):
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: the command on a terminal, as in a person's shell
        os.chdir(workspace)
        argv = [sys.executable, "-c", BLOCKED, *EVAL]
        os.execve(argv[0], argv, {**_env(tmp_path), "TERM": "xterm"})
    out = bytearray()

    def read() -> int:
        while select.select([fd], [], [], 0)[0]:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out.extend(data)
        return len(out)

    try:
        _wait(lambda: read() and (tmp_path / "started").is_file(), "the load to start")
        _wait(lambda: read() and LOADING.encode() in out, "the spinner to name the load")
        shown = len(out)
        # the load is still held: anything more is the spinner redrawing
        _wait(lambda: read() > shown, "the spinner to redraw during the load")
    finally:
        (tmp_path / "release").write_text("")
        _wait(lambda: read() is not None and os.waitpid(pid, os.WNOHANG)[0], "the command")
        read()
        os.close(fd)
    text = out.decode("utf-8", "replace")
    assert f"eval: {STARTING}" in text  # the spinner's first words, before any step
    assert "no task 'no-such-task'" in text


# --- the status itself, on a controlled clock ----------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(console: Console) -> list[str]:
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def _active(monkeypatch, status: Status) -> None:
    """``status`` as the running command's (``command_status`` sets it so)."""
    monkeypatch.setattr(status_mod, "_ACTIVE", status_mod.ContextVar("t", default=status))


def test_the_heartbeat_names_the_step_or_the_count_after_each_quiet_spell(monkeypatch):
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    clock = Clock()
    quiet = 3.0
    status = Status(console, "eval", live=False, clock=clock, quiet_s=quiet)
    status.tick = lambda: None  # type: ignore[method-assign]  # the test ticks it itself
    _active(monkeypatch, status)
    with status, listening(status.phases):
        assert _lines(console) == [f"eval: {STARTING}"]  # at once, before anything loads
        with phase("importing tau2-bench's package"):
            with phase("importing tau2-bench's package"):
                pass  # the same step again: said once
            clock.now += quiet - 0.1
            Status.tick(status)  # not yet due
            clock.now += 0.1
            Status.tick(status)
            clock.now += 1
            Status.tick(status)  # the heartbeat printed a line: the next is `quiet` later
        update = plain_progress(console, every_s=1000, clock=clock, what="rollouts")
        update("start eval: tau2-base", 0, 4)
        clock.now += quiet
        Status.tick(status)
    assert _lines(console) == [
        f"eval: {STARTING}",
        "eval: importing tau2-bench's package...",
        "eval: importing tau2-bench's package, 3s elapsed",
        "eval: tau2-base rollouts 0/4 (0%), 4s elapsed",
        "eval: tau2-base rollouts 0/4 (0%), 7s elapsed",
    ]
    # never more than 5 s without a line: the heartbeat is due after QUIET_S, looked for
    # every TICK_S, and a loaded machine may delay its thread by a second or two
    assert QUIET_S + TICK_S <= 3.0


def test_the_status_ends_before_the_result_prints(monkeypatch):
    from harnessctl.cli.render import console as result_console

    err = Console(file=io.StringIO(), width=200, force_terminal=False)
    status = Status(err, "eval", live=False)
    _active(monkeypatch, status)
    with status:
        result_console()  # the command asks for stdout's console: its result comes next
        assert status._done and not status._thread.is_alive()


def test_a_prompt_on_stderr_stops_the_spinner_first(monkeypatch):
    """On a terminal, anything else written to stderr (a confirmation prompt) stops the
    spinner before it is written, so no redraw erases the question."""
    tty = io.StringIO()
    tty.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr(sys, "stderr", tty)
    console = Console(stderr=True, force_terminal=True, width=100)
    status = Status(console, "profile", live=True)
    with status:
        assert status._spinning is not None  # "profile: starting" spins from the start
        sys.stderr.write("the bound is above the threshold: run it? [y/N]: ")
        assert status._spinning is None
        assert tty.getvalue().endswith("run it? [y/N]: ")
        with listening(status.phases), phase("loading the tasks"):
            assert status._spinning is not None  # the next step spins again
    assert sys.stderr is tty  # stderr is given back


def test_phases_reach_the_listener_of_their_context_only():
    seen: list[tuple[str, ...]] = []
    with phase("nobody listens"):  # no listener: nothing happens, nothing fails
        assert current() == ()
    with listening(seen.append), phase("loading the suite"), phase("importing tau2"):
        assert current() == ("loading the suite", "importing tau2")
    assert seen == [
        ("loading the suite",),
        ("loading the suite", "importing tau2"),
        ("loading the suite",),
        (),
    ]
    assert current() == ()


@pytest.mark.parametrize("as_json", [False, True])
def test_only_long_commands_get_a_status(as_json):
    with status_mod.command_status("show_command", err_console(), as_json=as_json) as none:
        assert none is None and status_mod.active_status() is None
    assert set(status_mod.LONG_COMMANDS.values()) >= {
        "eval", "evolve", "profile", "bench", "test", "export-pool", "rescue-sim", "report",
    }  # fmt: skip
