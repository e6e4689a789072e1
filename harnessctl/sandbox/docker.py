"""The ``docker`` backend: warm, hardened containers; one exec per rollout.

Each worker gets a container (created on first use, reused): no network, user 65534, all
capabilities dropped, ``no-new-privileges``, a read-only root filesystem with a small tmpfs
on /tmp, memory (= memory + swap), pids and CPU limits, and the labels ``harnessctl=1`` and
``harnessctl.run=<id>``. Its mounts: a private read-only copy of the runtime at /rt, private
read-only copies of the harness trees under /harness, the gateway's socket directory at the
same path as on the host (so ``HXRT_GATEWAY`` works unchanged), a per-container writable
/task and a per-container log directory. A rollout's task files are copied into /task before
the exec and the regular files copied back to the job's workdir after it, so the host reads
result.json, events.jsonl and db.sqlite where it always does.

The wall-clock limit is enforced from the host: past it the container is killed (taking
every process the harness started) and replaced by a fresh one on the next rollout. The
same happens when a rollout leaves processes behind. Engine failures become
``infra_error`` results, which the evaluator retries. A reaper removes labelled containers
whose owning process is gone (at start) and this run's containers (at close).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ..errors import HarnessctlError
from . import Job, Limits, SandboxResult, stage_packages
from .docker_files import copy_in, copy_out, read_only_tree
from .docker_reaper import live_pid_count, reap_containers

DEFAULT_IMAGE = "harnessctl-runtime:latest"
ENV_IMAGE = "HARNESSCTL_DOCKER_IMAGE"
SANDBOX_USER = "65534:65534"
LOG_DIR = "/hxlog"
# Redirect stdout/stderr to the log mount, then run the runtime in the same interpreter: the
# exec is detached, so a background child holding a pipe open cannot stall the host.
BOOT = (
    "import os\n"
    "for fd, name in ((1, 'stdout'), (2, 'stderr')):\n"
    "    f = os.open('/hxlog/' + name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)\n"
    "    os.dup2(f, fd); os.close(f)\n"
    "import sys; sys.path.insert(0, '/rt')\n"
    "from harnessctl_runtime.boot import main; main()\n"
)
START_HINT = (
    "start one with `dockerd &` (as root; log to a file) or `systemctl start docker`, "
    "or install it with `apt-get install -y docker.io`"
)


class _Container:
    """One warm container and its host-side directories."""

    def __init__(self, container, home: Path, limits: Limits) -> None:
        self.container = container
        self.home = home
        self.limits = limits

    @property
    def task_dir(self) -> Path:
        return self.home / "task"

    @property
    def log_dir(self) -> Path:
        return self.home / "log"


class DockerSandbox:
    """Rollouts in warm Docker containers; see the module docstring for what it gives."""

    name = "docker"

    def __init__(
        self,
        image: str | None = None,
        python: str = "/usr/bin/python3",
        cpus: float = 1.0,
        tmpfs_mb: int = 64,
        poll_s: float = 0.01,
    ) -> None:
        self.image = image or os.environ.get(ENV_IMAGE) or DEFAULT_IMAGE
        self.python = python
        self.cpus = cpus
        self.tmpfs_mb = tmpfs_mb
        self.poll_s = poll_s
        self.run_id = uuid.uuid4().hex[:12]
        self.client: Any = None
        self.root: Path | None = None
        self.gateway_dir: Path | None = None
        self.isolation: dict = {}
        self._idle: list[_Container] = []
        self._all: list[_Container] = []
        self._lock = threading.Lock()
        self._copy_lock = threading.Lock()
        self._harness_copies: dict[str, str] = {}

    # --- lifecycle ---------------------------------------------------------------------
    def start(self, gateway_dir: Path | None = None) -> None:
        self.client = connect()
        try:
            self.client.images.get(self.image)
        except Exception as exc:  # ImageNotFound or an engine error: say how to fix it
            raise HarnessctlError(
                f"docker image {self.image!r} is not available ({exc}); build it offline with "
                "scripts/build-runtime-image.sh"
            ) from exc
        if gateway_dir is None:
            raise HarnessctlError(
                "the docker sandbox needs the gateway's unix socket (the container has no "
                "network): unset HARNESSCTL_GATEWAY_PORT"
            )
        reap_containers(self.client)
        self.gateway_dir = Path(gateway_dir)
        self.root = Path(tempfile.mkdtemp(prefix="hxdk-"))
        os.chmod(self.root, 0o711)
        runtime_src = Path(__file__).resolve().parent.parent / "runtime"
        shutil.copytree(
            runtime_src,
            self.root / "rt" / "harnessctl_runtime",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        read_only_tree(self.root / "rt")
        (self.root / "harnesses").mkdir(mode=0o755)
        (self.root / "envs").mkdir(mode=0o755)
        self.isolation = {
            "backend": "docker",
            "image": self.image,
            "filesystem": "private (read-only image; /harness, /rt read-only; /task writable)",
            "network": "none",
            "user": SANDBOX_USER,
            "cap_drop": "ALL",
            "no_new_privileges": True,
            "read_only_rootfs": True,
            "pid_namespace": True,
            "rlimits": True,
            "cpus": self.cpus,
        }

    def close(self) -> None:
        if self.client is not None:
            with self._lock:
                self._idle.clear()
                self._all.clear()
            reap_containers(self.client, run_id=self.run_id)
            self.client.close()
            self.client = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    # --- containers --------------------------------------------------------------------
    def _labels(self) -> dict[str, str]:
        return {
            "harnessctl": "1",
            "harnessctl.run": self.run_id,
            "harnessctl.pid": str(os.getpid()),
            "harnessctl.host": socket.gethostname(),
        }

    def _create(self, limits: Limits) -> _Container:
        assert self.root is not None and self.client is not None, "start() the sandbox first"
        home = Path(tempfile.mkdtemp(prefix="c-", dir=self.root))
        os.chmod(home, 0o711)
        for sub in ("task", "log"):
            (home / sub).mkdir()
            _give_to_sandbox(home / sub)
        mem = f"{limits.memory_mb}m"
        volumes = {
            str(self.root / "rt"): {"bind": "/rt", "mode": "ro"},
            str(self.root / "envs"): {"bind": "/envs", "mode": "ro"},
            str(self.root / "harnesses"): {"bind": "/harness", "mode": "ro"},
            str(home / "task"): {"bind": "/task", "mode": "rw"},
            str(home / "log"): {"bind": LOG_DIR, "mode": "rw"},
            str(self.gateway_dir): {"bind": str(self.gateway_dir), "mode": "ro"},
        }
        container = self.client.containers.run(
            self.image,
            [self.python, "-I", "-S", "-c", "import signal; signal.pause()"],
            detach=True,
            name=f"hx-{self.run_id}-{home.name[2:]}",
            labels=self._labels(),
            network_mode="none",
            user=SANDBOX_USER,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={self.tmpfs_mb}m"},
            mem_limit=mem,
            memswap_limit=mem,
            pids_limit=limits.nproc + 8,
            nano_cpus=int(self.cpus * 1e9),
            volumes=volumes,
            working_dir="/task",
            environment={"LANG": "C.UTF-8"},
        )
        return _Container(container, home, limits)

    def _acquire(self, limits: Limits) -> _Container:
        with self._lock:
            for i, warm in enumerate(self._idle):
                if warm.limits == limits:
                    return self._idle.pop(i)
        fresh = self._create(limits)
        with self._lock:
            self._all.append(fresh)
        return fresh

    def _release(self, warm: _Container) -> None:
        with self._lock:
            self._idle.append(warm)

    def _discard(self, warm: _Container) -> None:
        """Kill a container (and every process in it); the next rollout gets a fresh one."""
        with self._lock:
            if warm in self._all:
                self._all.remove(warm)
        # already gone or the engine is down: the reaper retries at close
        with contextlib.suppress(Exception):
            warm.container.remove(force=True)
        shutil.rmtree(warm.home, ignore_errors=True)

    def _harness_dir(self, job: Job) -> str:
        assert self.root is not None
        with self._copy_lock:  # workers start together: copy each harness tree once
            return self._harness_dir_locked(job)

    def _harness_dir_locked(self, job: Job) -> str:
        assert self.root is not None
        name = self._harness_copies.get(job.harness.hash)
        if name is None:
            name = job.harness.hash[:16]
            dst = self.root / "harnesses" / name
            if not dst.exists():
                shutil.copytree(
                    job.harness.path, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
                )
                read_only_tree(dst)
            self._harness_copies[job.harness.hash] = name
        return f"/harness/{name}"

    # --- one rollout -------------------------------------------------------------------
    def run(self, job: Job) -> SandboxResult:
        """Run one rollout in a warm container; never raises for engine failures."""
        started = time.monotonic()
        harness_dir = self._harness_dir(job)
        env_path = ":".join(
            f"/{rel}" for rel in stage_packages(self.root, job.packages, self._copy_lock)
        )
        try:
            warm = self._acquire(job.limits)
        except Exception as exc:  # engine down, image gone, limits refused
            return self._infra(f"cannot create a container: {exc}", started)
        try:
            return self._exec(warm, job, harness_dir, env_path, started)
        except Exception as exc:  # the engine failed mid-rollout: retried by the evaluator
            self._discard(warm)
            return self._infra(f"docker engine error: {type(exc).__name__}: {exc}", started)

    def _infra(self, message: str, started: float) -> SandboxResult:
        return SandboxResult(
            None, False, time.monotonic() - started, infra_error=message, isolation=self.isolation
        )

    def _exec(self, warm: _Container, job: Job, harness_dir: str, env_path: str, started: float):
        assert self.client is not None
        api = self.client.api
        copy_in(job.workdir, warm.task_dir)
        for name in ("stdout", "stderr"):  # a runtime that fails to start must not show old logs
            (warm.log_dir / name).unlink(missing_ok=True)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            **job.env,
            "HXRT_HARNESS_DIR": harness_dir,
            "HXRT_ENV_PATH": env_path,
            "HXRT_TASK_DIR": "/task",
        }
        exec_id = api.exec_create(
            warm.container.id,
            [self.python, "-I", "-S", "-c", BOOT],
            environment=env,
            user=SANDBOX_USER,
            workdir="/task",
        )["Id"]
        api.exec_start(exec_id, detach=True)
        # the clock starts with the runtime, not with a first rollout's container creation
        deadline = time.monotonic() + job.limits.timeout_s
        timed_out = False
        info = api.exec_inspect(exec_id)
        while info.get("Running"):
            if time.monotonic() >= deadline:
                timed_out = True
                break
            time.sleep(self.poll_s)
            info = api.exec_inspect(exec_id)
        if not timed_out and info.get("ExitCode") != 0 and _died(warm.container):
            # the container died under the rollout (killed, engine restart): not the task's
            # fault, so an infrastructure error the evaluator retries
            self._discard(warm)
            return self._infra(f"container died (exit {info.get('ExitCode')})", started)
        healthy = not timed_out and _process_count(warm.container) <= 1
        if not healthy:
            # a timeout or processes left behind: kill them all with the container
            warm.container.kill()
        stdout = _tail(warm.log_dir / "stdout")
        stderr = _tail(warm.log_dir / "stderr")
        copy_out(warm.task_dir, job.workdir)
        if healthy:
            self._release(warm)
        else:
            self._discard(warm)
        return SandboxResult(
            exit_code=None if timed_out else info.get("ExitCode"),
            timed_out=timed_out,
            wall_s=time.monotonic() - started,
            stdout_tail=stdout,
            stderr_tail=stderr,
            isolation={**self.isolation, "memory_mb": job.limits.memory_mb},
        )


def connect():
    """A docker client for the engine in the environment, or a HarnessctlError saying how."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a declared dependency
        raise HarnessctlError("the docker sandbox needs the `docker` package") from exc
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # DockerException, connection refused, socket missing
        raise HarnessctlError(
            f"no Docker engine reachable ({type(exc).__name__}: {exc}); {START_HINT}"
        ) from exc
    return client


def _process_count(container) -> int:
    """Processes alive in the container: its pids cgroup on the host, else `docker top`."""
    count = live_pid_count(container.id)
    if count is None:
        count = len(container.top().get("Processes") or [])
    return count


def _died(container, within_s: float = 1.0) -> bool:
    """Whether the container is going away. A removal kills the exec'd process before the
    container's state changes, so a non-zero exit is given a moment to show which it was."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            container.reload()
        except Exception:  # NotFound or the engine is gone
            return True
        if container.status != "running" or container.attrs["State"].get("Dead"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _give_to_sandbox(path: Path) -> None:
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
        os.chmod(path, 0o700)
    else:  # rootless engines map users differently: let the sandbox user write anyway
        os.chmod(path, 0o777)


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
