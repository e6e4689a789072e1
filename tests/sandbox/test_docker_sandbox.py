"""The docker sandbox against a real engine: eval end to end, the reaper, clear errors.

The ``docker_engine`` fixture builds the offline image with scripts/build-runtime-image.sh.
Without a reachable engine the tests skip, except under CI (``CI`` set), where they fail:
CI must exercise the container path, not skip it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from harnessctl.errors import HarnessctlError
from harnessctl.sandbox.docker import DEFAULT_IMAGE, SECCOMP_PROFILE, DockerSandbox
from harnessctl.sandbox.docker_reaper import live_pid_count, reap_containers
from tests.helpers import ROOT
from tests.helpers.cli import eval_json, invoke, rows, task_flags

BUILD = ROOT / "scripts" / "build-runtime-image.sh"
TASKS = ["dev-000", "dev-004", "dev-020", "dev-030"]


def my_containers(client) -> list:
    """Containers this test process (the CLI runs in-process) still owns."""
    return client.containers.list(
        all=True, filters={"label": ["harnessctl=1", f"harnessctl.pid={os.getpid()}"]}
    )


@pytest.mark.slow
def test_eval_in_docker_matches_local_and_leaves_no_container(workspace, docker_engine):
    result, data = eval_json(
        "dbbench-base", "--sandbox", "docker", "--rollouts", 1, *task_flags(TASKS)
    )
    assert result.exit_code == 0, result.output
    assert data["executed"] == 4
    stored = rows(workspace)
    isolation = [json.loads(r.isolation_json) for r in stored]
    assert {i["backend"] for i in isolation} == {"docker"}
    assert all(i["network"] == "none" and i["read_only_rootfs"] for i in isolation)
    assert my_containers(docker_engine) == []
    docker_outcomes = {r.task_id: r.outcome for r in stored}
    assert docker_outcomes and all(r.prompt_tokens > 0 for r in stored)

    # the same rollouts on the local backend (a fresh store) reach the same outcomes: the
    # sandbox changes where the code runs, not what it does
    (workspace / ".harnessctl").rename(workspace / ".harnessctl-docker")
    _, local = eval_json("dbbench-base", "--sandbox", "local", "--rollouts", 1, *task_flags(TASKS))
    assert {r.task_id: r.outcome for r in rows(workspace)} == docker_outcomes
    assert local["summary"]["outcomes"] == data["summary"]["outcomes"]


def test_cached_rollouts_need_no_container(workspace, docker_engine):
    eval_json("dbbench-base", "--sandbox", "docker", "--rollouts", 1, *task_flags(TASKS[:1]))
    again, data = eval_json(
        "dbbench-base", "--sandbox", "docker", "--rollouts", 1, *task_flags(TASKS[:1])
    )
    assert again.exit_code == 0 and data["cached"] == 1 and data["executed"] == 0


def test_reaper_removes_orphans_but_not_live_runs(docker_engine, tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that is certainly gone: the "killed run"
    import socket

    def labelled(pid: int):
        return docker_engine.containers.create(
            DEFAULT_IMAGE,
            ["/usr/bin/python3", "-I", "-S", "-c", "pass"],
            labels={
                "harnessctl": "1",
                "harnessctl.run": "test-reaper",
                "harnessctl.pid": str(pid),
                "harnessctl.host": socket.gethostname(),
            },
            network_mode="none",
        )

    orphan, live = labelled(dead.pid), labelled(os.getpid())
    try:
        gw = tmp_path / "gw"
        gw.mkdir()
        sandbox = DockerSandbox()
        sandbox.start(gw)  # the reaper runs here
        ids = {c.id for c in docker_engine.containers.list(all=True)}
        assert orphan.id not in ids and live.id in ids
        sandbox.close()
        assert reap_containers(docker_engine, run_id="test-reaper") == 1
        assert live.id not in {c.id for c in docker_engine.containers.list(all=True)}
    finally:
        for c in (orphan, live):
            with contextlib.suppress(Exception):
                c.remove(force=True)


def test_unreachable_engine_names_how_to_start_one(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(HarnessctlError) as err:
        DockerSandbox().start(Path("/tmp"))
    assert "dockerd" in str(err.value) and "systemctl start docker" in str(err.value)


def test_missing_image_names_the_build_script(docker_engine, tmp_path):
    sandbox = DockerSandbox(image="harnessctl-runtime:no-such-tag")
    with pytest.raises(HarnessctlError) as err:
        sandbox.start(tmp_path)
    assert "build-runtime-image.sh" in str(err.value)


@pytest.mark.slow
def test_a_container_killed_mid_run_is_an_infra_error_then_retried(workspace, docker_engine):
    """Kill every container of the run while rollouts sleep: retried on fresh containers."""
    from tests.helpers.cli import make_variant

    make_variant(
        workspace,
        "sleepy",
        "return messages + self.history(state)",
        "import time\n        time.sleep(3 if state.round <= 1 else 0)\n"
        "        return messages + self.history(state)",
    )
    import threading

    stop = threading.Event()

    def killer():
        # the first container of this process that runs a rollout is removed mid-rollout
        while not stop.is_set():
            for c in my_containers(docker_engine):
                if (live_pid_count(c.id) or 0) >= 2:  # its init + the exec'd runtime
                    c.remove(force=True)
                    return
            time.sleep(0.05)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        result, data = eval_json(
            "sleepy", "--sandbox", "docker", "--rollouts", 1, *task_flags(TASKS[:2])
        )
    finally:
        stop.set()
        thread.join()
    assert result.exit_code == 0, result.output
    assert "infra_error" not in data["summary"]["outcomes"]
    assert data["summary"]["rollouts"] == 2
    stored = rows(workspace)
    retried = [(r.task_id, r.outcome, r.error, r.attempts) for r in stored]
    assert max(r.attempts for r in stored) >= 2, retried  # at least one rollout was retried


def test_seccomp_profile_refuses_what_reaches_other_processes_or_outlives_a_rollout():
    """No engine needed: the allowlist the containers run under (issue #14)."""
    profile = json.loads(SECCOMP_PROFILE.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    allowed = {
        name
        for rule in profile["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW"
        for name in rule["names"]
    }
    refused = {
        "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
        "shmget", "shmat", "msgget", "semget", "ipc", "mq_open", "mq_timedsend",
        "unshare", "setns", "mount", "chroot", "bpf", "perf_event_open", "userfaultfd",
        "keyctl", "add_key", "io_uring_setup", "open_by_handle_at", "clone3",
    }  # fmt: skip
    assert not allowed & refused, allowed & refused
    assert {"read", "write", "execve", "clone", "wait4", "socket", "connect"} <= allowed


def test_fresh_mode_from_the_environment(monkeypatch):
    monkeypatch.setenv("HARNESSCTL_DOCKER_FRESH", "1")
    assert DockerSandbox().fresh is True
    monkeypatch.setenv("HARNESSCTL_DOCKER_FRESH", "0")
    assert DockerSandbox().fresh is False
    assert DockerSandbox(fresh=True).fresh is True


@pytest.mark.slow
def test_fresh_container_flag_runs_each_rollout_in_its_own_container(workspace, docker_engine):
    warm, warm_data = eval_json(
        "dbbench-base", "--sandbox", "docker", "--rollouts", 1, *task_flags(TASKS[:3])
    )
    (workspace / ".harnessctl").rename(workspace / ".harnessctl-warm")  # nothing cached
    fresh, data = eval_json(
        "dbbench-base",
        "--sandbox",
        "docker",
        "--fresh-container",
        "--rollouts",
        1,
        *task_flags(TASKS[:3]),
    )
    assert warm.exit_code == fresh.exit_code == 0, fresh.output
    assert data["executed"] == 3
    stored = rows(workspace)
    assert {json.loads(r.isolation_json)["container"] for r in stored} == {"fresh per rollout"}
    assert data["summary"]["outcomes"] == warm_data["summary"]["outcomes"]
    assert my_containers(docker_engine) == []


def test_fresh_container_with_another_backend_is_a_usage_error(workspace):
    result = invoke("eval", "dbbench-base", "--sandbox", "local", "--fresh-container")
    assert result.exit_code == 2 and "--fresh-container" in result.output
    assert "docker" in result.output and not (workspace / ".harnessctl" / "store.db").exists()
