"""ALFWorld's engine processes: concurrent episodes play on separate engines (no lock shared
between games), an engine that dies is an error of its episode only, idle engines are
closed, and none outlives the process that started it, however that process ends (normal
exit, an exception, Ctrl-C, SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from harnessctl.envs import get_environment
from tests.helpers import ROOT

try:
    import alfworld  # noqa: F401  (the `alfworld` extra; .ci/run installs it)
except ImportError:  # CI must run these: it fails there instead of skipping
    if os.environ.get("CI"):
        raise
    pytest.skip("pip install -e '.[alfworld]' to run these", allow_module_level=True)

from harnessctl.envs.alfworld import play

GAMES = ROOT / "examples" / "alfworld" / "games"


@pytest.fixture(scope="module")
def tasks():
    return get_environment("alfworld").load_tasks(GAMES).tasks


def _running(pid: int) -> bool:
    """True while ``pid`` is a process that has not exited (a zombie has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _marked(mark: str) -> list[int]:
    """Engine processes whose environment carries ``mark`` (they inherit their host's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        engine = b"harnessctl.envs.alfworld.engine" in cmdline and mark.encode() in environ
        if engine and _running(int(entry.name)):
            found.append(int(entry.name))
    return found


def _states(pids) -> list[str]:
    """Each process's state and parent (from /proc), for a failure's message."""
    found = []
    for pid in pids:
        try:
            found.append(f"{pid}: " + Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:40])
        except OSError:
            found.append(f"{pid}: gone")
    return found


def _gone(pids, within_s: float = 15.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(_running(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def test_concurrent_games_play_on_separate_engines_at_once(tasks):
    """Two episodes in two threads: two engine processes, and their steps overlap in time
    (with one lock around every game, as before, they could not)."""
    env = get_environment("alfworld", memo=False)
    spans: dict[int, list[tuple[float, float]]] = {0: [], 1: []}
    episodes = [env.open_episode(tasks[i], 0) for i in (0, 1)]
    both_reset = threading.Barrier(2)

    def play_game(i: int) -> None:
        episode = episodes[i]
        episode.reset()
        both_reset.wait(timeout=60)
        for command in ["look"] * 10:
            t0 = time.monotonic()
            episode.step("act", command, None)
            spans[i].append((t0, time.monotonic()))

    try:
        threads = [threading.Thread(target=play_game, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        engines = {e.game._engine.pid for e in episodes}
        assert len(engines) == 2 and set(play.engine_pids()) >= engines
        overlaps = sum(a0 < b1 and b0 < a1 for a0, a1 in spans[0] for b0, b1 in spans[1])
        assert overlaps > 0
    finally:
        for episode in episodes:
            episode.close()


def test_an_engine_that_dies_fails_its_episode_only(tasks):
    env = get_environment("alfworld", memo=False)
    episode = env.open_episode(tasks[3], 0)
    try:
        episode.reset()
        pid = episode.game._engine.pid
        os.kill(pid, signal.SIGKILL)
        assert _gone([pid])
        with pytest.raises(play.EngineError, match="engine process exited"):
            episode.step("act", "look", None)
        assert pid not in play.engine_pids()
    finally:
        episode.close()
    again = env.open_episode(tasks[3], 0)
    try:
        again.reset()
        for command in tasks[3].record["walkthrough"]:
            result = again.step("act", command, None)
        assert result.done and result.info["won"] and again.game._engine.pid != pid
    finally:
        again.close()


@pytest.mark.slow
def test_idle_engines_are_closed(tasks, monkeypatch):
    monkeypatch.setattr(play, "IDLE_S", 0.5)
    game = play.Game(tasks[4].record, memo=False)  # an engine, whatever earlier tests memoised
    game.reset()
    pid = game._engine.pid
    game.close()
    assert _gone([pid], within_s=20) and pid not in play.engine_pids()


SCRIPT = textwrap.dedent(
    """
    import signal
    import sys
    from harnessctl.envs import get_environment
    # Ctrl-C interrupts, as in a terminal's job, even where this test runs in a background
    # job of a non-interactive shell (which starts with SIGINT ignored, inherited here)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env = get_environment("alfworld", memo=False)
    tasks = env.load_tasks(sys.argv[2]).tasks
    episodes = [env.open_episode(t, 0) for t in tasks[:2]]
    for e in episodes:
        e.reset()
    print("ready", flush=True)
    sys.stdin.readline()  # the test looks at the engines, then says how to end
    if sys.argv[1] == "raise":
        raise RuntimeError("the run failed")
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["exit", "raise", "ctrl-c", "sigkill"])
def test_no_engine_outlives_its_host(ending, tmp_path):
    mark = f"HXTEST_ENGINE_MARK={uuid.uuid4().hex}"
    env = {**os.environ, "HXTEST_ENGINE_MARK": mark, "PYTHONPATH": str(ROOT)}
    host = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, ending, str(GAMES)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # its own process group, as a terminal's job is
    )
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == b"ready", host.stderr.read().decode()[-2000:]
        engines = _marked(mark)
        assert len(engines) == 2
        if ending in ("exit", "raise"):
            assert host.stdin is not None
            host.stdin.write(b"go\n")
            host.stdin.flush()
        elif ending == "ctrl-c":
            os.killpg(host.pid, signal.SIGINT)  # what a terminal sends the whole job
        elif ending == "sigkill":
            os.kill(host.pid, signal.SIGKILL)
        try:
            code = host.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the host did not end: {_states([host.pid])}; engines {_states(engines)}")
        assert host.stderr is not None
        said = host.stderr.read().decode(errors="replace")[-2000:]
        assert code != 0 if ending != "exit" else code == 0, (code, said)
        assert _gone(engines), (_states(engines), code, said)
        assert _marked(mark) == [], (_states(_marked(mark)), code, said)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
