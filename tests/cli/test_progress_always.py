"""Progress always (issue #28): under --json, progress lines go to stderr and stdout stays
pure JSON; neither an offline eval nor a cached one imports litellm (seconds to import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from rich.console import Console

from harnessctl.cli.progress import plain_progress, stage

EVAL = ["eval", "dbbench-base", "--rollouts", "1", "--task", "dev-000", "--task", "dev-004"]
WRAPPED = (
    "import sys\n"
    "from harnessctl.cli import app\n"
    "try:\n"
    "    app(sys.argv[1:], standalone_mode=False)\n"
    "finally:\n"
    "    print('litellm imported:', 'litellm' in sys.modules, file=sys.stderr)\n"
)


def run(workspace, *args):
    cmd = [sys.executable, "-c", WRAPPED, *args]
    return subprocess.run(
        cmd, cwd=workspace, env=os.environ.copy(), capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_json_eval_prints_progress_on_stderr_and_pure_json_on_stdout(workspace):
    first = run(workspace, *EVAL, "--json")
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)  # nothing but the JSON document
    assert data["kind"] == "eval" and data["executed"] == 2
    # progress as one JSON object a line on stderr, naming the work
    events = [json.loads(x) for x in first.stderr.splitlines() if x.startswith('{"kind"')]
    assert [(e["done"], e["total"]) for e in events][:: len(events) - 1] == [(0, 2), (2, 2)]
    assert all(e["work"] == "eval: dbbench-base" for e in events)
    # an offline test double is answered without litellm (gateway.llm's offline provider)
    assert "litellm imported: False" in first.stderr
    cached = run(workspace, *EVAL, "--json")
    assert cached.returncode == 0, cached.stderr
    assert json.loads(cached.stdout)["cached"] == 2
    assert '"done": 2, "total": 2' in cached.stderr
    # served from the store: no model is called, so litellm (seconds to import) is not loaded
    assert "litellm imported: False" in cached.stderr


def test_plain_progress_prints_at_start_now_and_then_and_at_the_end(tmp_path):
    out = tmp_path / "log.txt"
    now = [0.0]
    with out.open("w") as fh:
        console = Console(file=fh, width=120)
        update = plain_progress(console, every_s=10, clock=lambda: now[0], what="tasks")
        update("start", 0, 3)
        now[0] = 2.0
        update("task", 1, 3)  # too soon: no line
        now[0] = 12.5
        update("task", 2, 3)
        now[0] = 13.0
        update("task", 3, 3)  # the last one always prints
        with stage(console, "report: writing"):
            pass
    lines = out.read_text().splitlines()
    assert lines[:3] == [
        "tasks 0/3 (0%), 0s elapsed",
        "tasks 2/3 (67%), 12s elapsed",
        "tasks 3/3 (100%), 13s elapsed",
    ]
    assert lines[3] == "report: writing..." and lines[4].startswith("report: writing: done in")


def _pty_output(argv: list[str], cwd, limit_s: float = 300) -> list[tuple[float, bytes]]:
    """Run ``argv`` on a pseudo-terminal (as a person's shell does) and return what it wrote,
    each chunk with the seconds since the start it arrived at."""
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, its stdout and stderr the terminal
        os.chdir(cwd)
        os.execve(argv[0], argv, {**os.environ, "TERM": "xterm"})
    start, chunks = time.monotonic(), []
    try:
        while time.monotonic() - start < limit_s:
            if not select.select([fd], [], [], 0.5)[0]:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not data:
                break
            chunks.append((time.monotonic() - start, data))
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, b"".join(d for _, d in chunks)[-2000:]
    return chunks


@pytest.mark.slow
def test_a_terminal_sees_what_runs_within_2_s_and_no_silence_over_5_s(workspace):
    """Issues #41 and #56: in a terminal, a long command says what it does within 2 s of
    starting (its status line: what it loads, then the rollout bar naming its work) and is
    never silent for more than 5 s (the spinner and the bar's labelled countdown redraw)."""
    argv = [sys.executable, "-m", "harnessctl.cli", "eval", "dbbench-base", "--split", "train"]
    chunks = _pty_output([*argv, "--rollouts", "1", "--workers", "2"], workspace)
    times = [0.0] + [t for t, _ in chunks]
    text = b"".join(d for _, d in chunks).decode("utf-8", "replace")
    first_status = next(t for t, d in chunks if b"eval: starting" in d)
    assert first_status < 2.0, text[:500]
    assert "eval: dbbench-base" in text  # the bar names the work it counts
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) <= 5.0
    assert "left" in text and "success" in text  # the countdown is labelled; the summary
