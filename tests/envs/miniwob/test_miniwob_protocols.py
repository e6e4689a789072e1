"""MiniWoB++ through the whole rollout path, where no evolve is needed: ``harnessctl eval
miniwob-base --policy replay/miniwob`` solves every task of the suite, in text and through
function calling (with the prompt of that protocol); each of sim/miniwob's failure modes fails
the base and its own catalogue repair rescues it (the format mode under function calling
included); a ``kill -9`` of a running eval takes its browsers with it. No evolve: this
module runs beside test_miniwob_e2e.py, which builds on the session's evolve
(tests/helpers/miniwob_world.py), and waits on nothing of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from tests.envs.miniwob import require_browser
from tests.helpers.cli import cli_json
from tests.helpers.miniwob_world import (
    BASE,
    SUITE,
    TASKS,
    configure,
    function_calling,
    harness_hash,
    repaired,
    replay,
    store,
    variant,
)
from tests.helpers.workspaces import isolate

require_browser()

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

#: sim/miniwob's modes, the protocol, and the catalogue repair of each
#: (harnessctl/envs/miniwob/directions/repairs).
REPAIRS = {
    ("format", "text"): "format-reprompt",
    ("label", "text"): "label-resolve",
    ("loop", "text"): "repeat-guard",
    ("drift", "text"): "page-compaction",
    ("format", "functions"): "call-in-text",
}
FC = f"{BASE}.fc"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A fresh workspace as `harnessctl init` makes it, the local sandbox and 2 workers, with
    miniwob-base's function-calling copy (``miniwob-base.fc``)."""
    root = tmp_path_factory.mktemp("miniwob-protocols") / "ws"
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, tmp_path_factory.mktemp("home"), root)
        configure(root)
        variant(root, FC, function_calling)
        yield root


def test_replay_solves_every_task_of_the_suite(ws):
    done = replay(ws, BASE)
    summary = done["summary"]
    assert summary["rollouts"] == TASKS and summary["outcomes"] == {"success": TASKS}, summary
    rows = store(ws).rollouts(policy_id="replay/miniwob")
    assert len(rows) == TASKS and all(r.success for r in rows)
    row = next(r for r in rows if r.task_id == "unicode-test.1")
    trajectory = store(ws).trajectory(row)
    kinds = [s.kind for s in trajectory.steps]
    assert kinds[0] == "reset" and set(kinds[1:]) == {"step"}
    assert 'Click on the "Cancél" button.' in trajectory.steps[0].observation  # UTF-8
    detail = trajectory.score.detail
    assert detail["raw_reward"] == 1.0 and detail["threshold"] == 1.0 and detail["error"] is None
    menu = next(r for r in rows if r.task_id == "click-menu-2.1")
    assert menu.success and store(ws).trajectory(menu).score.detail["raw_reward"] == 1.0


def test_replay_through_function_calling_scores_the_same_with_its_own_prompt(ws):
    summary = replay(ws, FC)["summary"]
    assert summary["outcomes"] == {"success": TASKS}, summary
    row = next(r for r in store(ws).rollouts(harness_hash=harness_hash(ws, FC)) if r.success)
    calls = store(ws).trajectory(row).calls
    assert calls and all(c.tool_calls for c in calls), "a reply without a function call"
    system = calls[0].messages[0]
    assert system["role"] == "system" and "Action:" not in system["content"]
    assert "call exactly one of your functions" in system["content"]


@pytest.mark.parametrize("mode, protocol", sorted(REPAIRS))
def test_each_sim_mode_fails_the_base_and_its_own_repair_rescues_it(ws, mode, protocol):
    base = FC if protocol == "functions" else BASE
    sibling = repaired(ws, REPAIRS[mode, protocol], base=base)
    only = ["--param", f"rate_{mode}=1", "--param", "skill=1", "--rollouts", 1]
    other = f"sqlite:///{ws.parent / f'{mode}-{protocol}.db'}"  # the module's keeps the gold's
    train = ["--suite", SUITE, "--split", "train", *only, "--store", other]
    failed = cli_json(ws, "eval", base, *train)["summary"]
    fixed = cli_json(ws, "eval", sibling, *train)["summary"]
    assert failed["outcomes"].get("success", 0) < fixed["outcomes"].get("success", 0), (
        failed,
        fixed,
    )
    assert fixed["success_rate"] >= 0.9, (mode, protocol, fixed)
    if protocol == "functions":  # the base keeps to the protocol: a call as text is no call
        assert failed["outcomes"].get("invalid_format", 0) > 0, failed


def _browsers_of(owner: int) -> dict[str, set[int]]:
    """The browser processes (Chromium's, by profile, with their process groups) of ``owner``."""
    marker = f"--user-data-dir={tempfile.gettempdir()}/hx-chromium-{owner}-"
    found: dict[str, set[int]] = {}
    for pid in _pids():
        flag = next((a for a in _cmdline(pid) if a.startswith(marker)), None)
        if flag is not None:
            found.setdefault(flag.split("=", 1)[1], set()).add(pid)
    for pids in found.values():
        groups = {_pgid(p) for p in pids} - {0}
        pids |= {p for p in _pids() if _pgid(p) in groups}
    return found


def test_a_killed_eval_takes_its_browsers_with_it(ws):
    """``kill -9`` of a real ``harnessctl eval`` with two workers and their browsers open: no
    process of its browsers, their drivers or helpers, and no profile, is left seconds later
    (its reaper did it: no other MiniWoB++ process runs afterwards to reap them)."""
    other = f"sqlite:///{ws.parent / 'killed.db'}"
    args = ["eval", BASE, "--suite", SUITE, "--split", "dev", "--policy", "replay/miniwob"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "harnessctl.cli", *args, "--rollouts", "1", "--store", other],
        cwd=ws,
        env={**os.environ, "HARNESSCTL_WORKSPACE": str(ws)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        browsers = _browsers_of(proc.pid)
        while len(browsers) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            browsers = _browsers_of(proc.pid)
        assert len(browsers) == 2, browsers  # one per worker, both up
        reapers = [p for p in _pids() if "reaper.py" in " ".join(_cmdline(p)[-2:])]
        reapers = [p for p in reapers if _cmdline(p)[-1] == str(proc.pid)]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert reapers, "no reaper for the eval"
    left = {p for pids in browsers.values() for p in pids} | set(reapers)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (
        any(_running(p) for p in left) or any(os.path.exists(p) for p in browsers)
    ):
        time.sleep(0.1)
    assert not [p for p in left if _running(p)], [(p, _cmdline(p)[:2]) for p in left]
    assert not [p for p in browsers if os.path.exists(p)]
    named = [p for p in _pids() if any(b in a for a in _cmdline(p) for b in browsers)]
    assert not named, [_cmdline(p)[:2] for p in named]


def _pids() -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [p.decode(errors="replace") for p in fh.read().split(b"\0") if p]
    except OSError:
        return []


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return 0


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
