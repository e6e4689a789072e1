"""Session worlds: each environment's costly evolve runs once per test session, in a
workspace of its own, and every module that needs its results gets a copy of that workspace
(a copy, not a re-run: a module's tests may change theirs freely).

A world is also a read-through rollout cache (``HARNESSCTL_CACHE_FROM``, ``read_through``):
a module whose own run differs from the world's (fewer rounds, other directions, more seeds)
reads through it from a fresh workspace and runs only the rollouts the world does not hold.
Tests that must exercise a fresh run (a kill -9 and resume, another executor, a hostile
harness) keep their own runs and never read through.

The fixtures are in ``tests/conftest.py`` (``dbbench_world``); every test that uses one is
in the slow tier (``-m slow``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harnessctl.constants import ENV_CACHE_FROM

DBBENCH_EVOLVE = ("evolve", "dbbench-base", "--split", "train", "--rounds", 2, "--rollouts", 2)
"""DBBench's test evolve: the train split, two rounds, two seeds (the README's command with
fewer rounds and seeds), which the evolve, profile and report tests share."""


@dataclass(frozen=True)
class World:
    """A finished workspace and what its costly command printed (``--json``)."""

    root: Path
    result: dict
    seconds: float
    """How long the command took (the session's log shows it)."""
    progress: tuple = ()
    """The command's progress events (``--json`` writes them on stderr), as its clock
    stamped them: ``(elapsed_s, work)``."""

    def to_json(self) -> dict:
        return {
            "root": str(self.root),
            "result": self.result,
            "seconds": self.seconds,
            "progress": list(self.progress),
        }

    @classmethod
    def from_json(cls, data: dict) -> World:
        progress = tuple(tuple(e) for e in data.get("progress", ()))
        return cls(Path(data["root"]), data["result"], data["seconds"], progress)

    def copy(self, dest: Path) -> Path:
        """A copy of the workspace at ``dest`` (git repository, harnesses, store and
        trajectories), for one module to change as it likes."""
        shutil.copytree(self.root, dest, symlinks=True)
        return dest

    @contextlib.contextmanager
    def read_through(self) -> Iterator[None]:
        """Within the block, every store reads through this world (``HARNESSCTL_CACHE_FROM``,
        so no workspace's tracked config changes)."""
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(ENV_CACHE_FROM, str(self.root))
            yield


def run_json(ws: Path, *args, timeout: float = 900, events: list | None = None) -> dict:
    """``harnessctl ARGS --json`` in a subprocess in ``ws``, as a user runs it; its JSON
    (and, into ``events``, its progress events from stderr)."""
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", *map(str, args), "--json"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    if events is not None:
        for line in proc.stderr.splitlines():
            if line.startswith('{"kind": "progress"'):
                events.append(json.loads(line))
    return json.loads(proc.stdout[proc.stdout.index("{") :])


SHARED_ENV = "HARNESSCTL_TEST_SHARED"
"""A directory that test runs started together share (scripts/test.sh runs the main, ART and
SkyRL environments' tests at once): each session fixture is then made once for all of them
(the small pool: about a minute each)."""


def shared_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A directory for ``name`` that every test process of this session shares: the session's
    base temp directory, or under ``-n`` (pytest-xdist) the one above the workers' own."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    if os.environ.get(SHARED_ENV):  # several test runs at once (scripts/test.sh)
        base = Path(os.environ[SHARED_ENV])
    path = base / name
    path.mkdir(exist_ok=True)
    return path


def once_per_session(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], dict]
) -> dict:
    """``make(directory)`` run once per test session, whatever the number of test processes:
    the first to get here runs it while the others wait on a file lock, then every process
    reads what it returned (JSON)."""
    import fcntl

    where = shared_dir(tmp_path_factory, name)
    done = where / "made.json"
    with open(where / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            done.write_text(json.dumps(make(where)))
        return json.loads(done.read_text())


def build_world(ws: Path, *args, timeout: float = 900) -> World:
    """Run ``harnessctl ARGS --json`` in the workspace ``ws`` (already made) as a world."""
    start = time.monotonic()
    events: list[dict] = []
    result = run_json(ws, *args, timeout=timeout, events=events)
    progress = tuple((e["elapsed_s"], e["work"]) for e in events)
    return World(ws, result, time.monotonic() - start, progress)
