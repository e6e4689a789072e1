"""os_interaction's task container holds against hostile commands: a fork bomb, a disk
filler and a command that never ends are stopped, recorded in the score's detail, and the
episode goes on in a working shell (real task containers)."""

from __future__ import annotations

import subprocess

import pytest

from harnessctl.envs.os_interaction import OSEnvironment
from harnessctl.envs.os_interaction.tasks import load_tasks
from tests.conftest import ROOT
from tests.os_helpers import require_os_image

require_os_image()
pytestmark = pytest.mark.timeout(300)

TASK = load_tasks(ROOT / "examples" / "os_interaction").by_id()["dev.4"]


@pytest.fixture
def episode():
    env = OSEnvironment(command_timeout_s=4, pids=64, disk_mb=160)
    played = env.open_episode(TASK, 0)
    played.reset()
    yield env, played
    container_id = played.container.id if played.container else None
    played.close()
    if container_id:  # closed means gone
        gone = subprocess.run(["docker", "inspect", container_id], capture_output=True)
        assert gone.returncode != 0


def test_a_command_that_never_ends_is_stopped_and_the_shell_goes_on(episode):
    env, played = episode
    played.step("bash", "cd /usr && export MARK=kept", None)
    stopped = played.step("bash", "echo started; sleep 1000", None)
    assert stopped.info["limit"] == "timeout" and "stopped" in stopped.info["error"]
    assert "started" in stopped.observation
    loop = played.step("bash", "while true; do :; done", None)  # a shell builtin loop
    assert loop.info["limit"] == "timeout"
    after = played.step("bash", "pwd; echo ${MARK:-lost}", None)
    assert after.observation.split() == ["/usr", "lost"]  # same directory, a fresh shell
    detail = env.score(TASK, ROOT, "3", played).detail
    assert [e["limit"] for e in detail["events"]] == ["timeout", "timeout"]


def test_a_fork_bomb_is_held_by_the_pids_limit_and_stopped(episode):
    env, played = episode
    played.step("bash", "echo kept > /root/file", None)
    played.step("bash", "bomb() { bomb | bomb & }; bomb", None)
    # the bomb holds the container's pids (64 here): a command either still runs within
    # them, or cannot start and the container is restarted (every process stopped, files
    # kept, `start` started again) and that is recorded
    held = played.step("bash", "sleep 2; ps -e --no-headers | wc -l", None)
    if "limit" in held.info:
        assert held.info["limit"] in ("pids", "timeout"), held
        events = env.score(TASK, ROOT, "3", played).detail["events"]
        assert events and events[0]["limit"] in ("pids", "timeout")
    else:
        assert int(held.observation.split()[-1]) <= 64, held
    alive = played.step("bash", "cat /root/file", None)
    assert "kept" in alive.observation.split("\n"), alive


def test_filling_the_disk_is_stopped_and_recorded(episode):
    env, played = episode
    big = played.step("bash", "head -c 200M /dev/zero > /root/big; ls -l /root/big", None)
    assert "File size limit exceeded" in big.observation  # RLIMIT_FSIZE: 64 MiB a file
    assert " 67108864 " in big.observation
    tmp = played.step(
        "bash", "head -c 40M /dev/zero > /tmp/a; head -c 40M /dev/zero > /tmp/b", None
    )
    assert "No space left" in tmp.observation  # /tmp: a 64 MiB tmpfs
    many = played.step(
        "bash", "for i in $(seq 50); do head -c 60M /dev/zero > /root/f$i; sleep 0.2; done", None
    )
    assert many.info["limit"] == "disk", many
    events = env.score(TASK, ROOT, "3", played).detail["events"]
    assert [e["limit"] for e in events] == ["disk"]


def test_the_task_container_has_no_network(episode):
    _, played = episode
    out = played.step("bash", "curl -sS -m 3 http://deb.debian.org/ 2>&1; echo rc=$?", None)
    assert "rc=0" not in out.observation
