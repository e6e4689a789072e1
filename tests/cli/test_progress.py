"""Progress when output is not a terminal: plain lines at the start, now and then, and at
the end, instead of a live bar that a log file or CI job cannot show."""

from __future__ import annotations

import io

from rich.console import Console

from harnessctl.cli.progress import plain_progress, rollout_progress


def test_plain_progress_prints_start_every_period_and_end():
    out = io.StringIO()
    now = [100.0]
    update = plain_progress(Console(file=out, width=200), every_s=10, clock=lambda: now[0])
    update("start", 0, 40)
    for done, t in ((1, 101), (2, 105), (3, 111), (4, 112), (39, 125), (40, 126)):
        now[0] = t
        update("rollout", done, 40)
    assert out.getvalue().splitlines() == [
        "rollouts 0/40 (0%), 0s elapsed",
        "rollouts 3/40 (8%), 11s elapsed",
        "rollouts 39/40 (98%), 25s elapsed",
        "rollouts 40/40 (100%), 26s elapsed",
    ]


def test_a_console_that_is_not_a_terminal_gets_plain_progress():
    out = io.StringIO()
    with rollout_progress(Console(file=out, force_terminal=False)) as update:
        update("start", 2, 5)
        update("rollout", 5, 5)
    assert out.getvalue().splitlines()[0] == "rollouts 2/5 (40%), 0s elapsed"
    assert out.getvalue().splitlines()[-1].startswith("rollouts 5/5 (100%)")


def test_progress_names_the_work_it_counts():
    """A `start LABEL` event (evaluate sends `start COMMAND: HARNESS`) names every line
    after it, in plain lines and on the live bar."""
    out = io.StringIO()
    update = plain_progress(Console(file=out, width=200), every_s=10, clock=lambda: 0.0)
    update("start evolve-judge: dbbench-base.termination.r1", 0, 8)
    update("rollout", 8, 8)
    assert out.getvalue().splitlines() == [
        "evolve-judge: dbbench-base.termination.r1 rollouts 0/8 (0%), 0s elapsed",
        "evolve-judge: dbbench-base.termination.r1 rollouts 8/8 (100%), 0s elapsed",
    ]
    live = io.StringIO()
    with rollout_progress(Console(file=live, force_terminal=True, width=200)) as bar:
        bar("start eval: dbbench-base", 0, 4)
        bar("rollout", 4, 4)
    assert "eval: dbbench-base rollouts" in live.getvalue()
