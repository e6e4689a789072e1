"""The ``docker`` backend: warm, hardened containers; one exec per rollout.

Each worker gets a container (created on first use, reused while provably clean): no
network, all capabilities dropped, ``no-new-privileges``, harnessctl's own seccomp allowlist
(``docker_seccomp.json``: no ptrace, process_vm_readv/writev, SysV IPC or POSIX message
queues), a read-only root filesystem with small tmpfs mounts on /tmp and /dev/shm (bounded
in size and inodes), memory (= memory + swap), pids and CPU limits, and the labels
``harnessctl=1`` and ``harnessctl.run=<id>``. Its PID 1 is a reaping idle init running as
root with no capabilities; every rollout is exec'd as user 65534, which can neither trace,
signal nor read the environment of the init (another uid), and never shares the container
with another rollout. The rollout's gateway token reaches it in a file, not its environment.

Mounts: a private read-only copy of the runtime at /rt, private read-only copies of the
harness trees under /harness, the gateway's socket directory at the same path as on the host
(so ``HXRT_GATEWAY`` works unchanged), a per-container writable /task and a log directory
the sandbox user cannot write (the host creates the log files in it for every rollout, so
they cannot be swapped for links or FIFOs). A rollout's task files are copied into /task
before the exec and the regular files copied back to the job's workdir after it, so the host
reads result.json, events.jsonl and db.sqlite where it always does.

Between rollouts a container is reused only when it is provably clean: the only process
left in its pids cgroup is the init it was created with (host pid, start time, uid and
executable checked), /task was emptied by the host, the log files were recreated by the
host, and the next rollout's boot wiped /tmp, /dev/shm and /dev/mqueue before any harness
code ran (else it exits with ``SCRATCH_DIRTY`` and the rollout is run on a fresh
container). Anything else (a timeout, a process left behind, an init that changed) kills the
container. ``fresh=True`` (or ``HARNESSCTL_DOCKER_FRESH=1``) gives every rollout its own
container instead.

Engine failures become ``infra_error`` results, which the evaluator retries. A reaper removes
labelled containers, and work directories, whose owning process is gone (at start) and this
run's containers (at close).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..constants import (
    ENV_DOCKER_FRESH,
    RT_ENV_ENV_PATH,
    RT_ENV_HARNESS,
    RT_ENV_TASK,
    RT_ENV_TOKEN,
    RT_ENV_TOKEN_FILE,
)
from ..errors import HarnessctlError
from ..trees import copy_tree
from . import Job, Limits, SandboxResult, precompile, stage_packages
from .docker_files import copy_in, copy_out, read_only_tree, read_tail
from .docker_reaper import (
    WORKDIR_PREFIX,
    cgroup_pids,
    mark_workdir,
    process_identity,
    reap_containers,
    reap_workdirs,
)

DEFAULT_IMAGE = "harnessctl-runtime:latest"
ENV_IMAGE = "HARNESSCTL_DOCKER_IMAGE"
ENV_FRESH = ENV_DOCKER_FRESH  # 1: one container per rollout (no reuse at all)
SANDBOX_USER = "65534:65534"
INIT_USER = "0:0"  # the idle init: another uid than the rollouts', and no capabilities
LOG_DIR = "/hxlog"
TOKEN_FILE = LOG_DIR + "/token"
SECCOMP_PROFILE = Path(__file__).with_name("docker_seccomp.json")
SCRATCH = ("/tmp", "/dev/shm", "/dev/mqueue")  # writable by the sandbox user, wiped at boot
SCRATCH_DIRTY = 86  # boot's exit status when it could not wipe what an earlier rollout left
# PID 1 of every container: reaps orphans (so a finished double-fork leaves no zombie that
# would make a clean container look dirty) and otherwise sleeps. It runs as root without
# capabilities, so the sandbox user cannot ptrace, signal or inspect it.
INIT = (
    "import os, signal\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})\n"
    "while True:\n"
    "    signal.sigwait({signal.SIGCHLD})\n"
    "    try:\n"
    "        while os.waitpid(-1, os.WNOHANG)[0] > 0:\n"
    "            pass\n"
    "    except ChildProcessError:\n"
    "        pass\n"
)
# Wipe the scratch mounts an earlier rollout in this container may have filled (before any
# harness code runs: this is the host's code), prove them empty, then send stdout/stderr to
# the log files the host created and run the runtime in the same interpreter. Mount points
# (the gateway's socket directory under /tmp) are on another device and left alone; the
# sandbox cannot make one. The exec is detached, so a background child holding a pipe open
# cannot stall the host.
BOOT = (
    "import os\n"
    "def _wipe(top, dev):\n"
    "    left = []\n"
    "    for e in os.scandir(top):\n"
    "        try:\n"
    "            if e.is_dir(follow_symlinks=False):\n"
    "                if e.stat(follow_symlinks=False).st_dev != dev:\n"
    "                    continue\n"
    "                os.chmod(e.path, 0o700)\n"
    "                _wipe(e.path, dev)\n"
    "                os.rmdir(e.path)\n"
    "            else:\n"
    "                os.unlink(e.path)\n"
    "        except OSError:\n"
    "            left.append(e.name)\n"
    "    return left\n"
    f"for _top in {SCRATCH!r}:\n"
    "    try:\n"
    "        _dirty = _wipe(_top, os.stat(_top).st_dev)\n"
    "    except FileNotFoundError:\n"
    "        _dirty = []\n"
    "    except Exception:\n"
    "        _dirty = [_top]\n"
    "    if _dirty:\n"
    f"        os._exit({SCRATCH_DIRTY})\n"
    "for fd, name in ((1, 'stdout'), (2, 'stderr')):\n"
    "    f = os.open('/hxlog/' + name, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)\n"
    "    os.dup2(f, fd); os.close(f)\n"
    "import sys; sys.path.insert(0, '/rt')\n"
    "from harnessctl_runtime.boot import main; main()\n"
)
START_HINT = (
    "start one with `dockerd &` (as root; log to a file) or `systemctl start docker`, "
    "or install it with `apt-get install -y docker.io`"
)


class _Container:
    """One container, its host-side directories and the identity of its init."""

    def __init__(self, container, home: Path, limits: Limits, init: tuple | None) -> None:
        self.container = container
        self.home = home
        self.limits = limits
        self.init = init  # (host pid, start time, uid, executable) of PID 1, or None
        self.rollouts = 0

    @property
    def task_dir(self) -> Path:
        return self.home / "task"

    @property
    def log_dir(self) -> Path:
        return self.home / "log"


class _Dirty(Exception):
    """The container cannot be shown clean for the next rollout: replace it."""


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
        fresh: bool | None = None,
        scratch_inodes: int = 4096,
    ) -> None:
        self.image = image or os.environ.get(ENV_IMAGE) or DEFAULT_IMAGE
        self.python = python
        self.cpus = cpus
        self.tmpfs_mb = tmpfs_mb
        self.poll_s = poll_s
        if fresh is None:
            fresh = os.environ.get(ENV_FRESH, "").strip().lower() in ("1", "true", "yes", "on")
        self.fresh = bool(fresh)
        self.scratch_inodes = scratch_inodes
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
        self._seccomp = ""
        self._remover: ThreadPoolExecutor | None = None  # removes used containers off the clock

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
        # the engine takes the profile's text, not a path
        self._seccomp = json.dumps(json.loads(SECCOMP_PROFILE.read_text()), separators=(",", ":"))
        reap_containers(self.client)
        reap_workdirs(Path(tempfile.gettempdir()))  # after the containers that mounted them
        self.gateway_dir = Path(gateway_dir)
        self.root = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        os.chmod(self.root, 0o711)
        mark_workdir(self.root)
        runtime_src = Path(__file__).resolve().parent.parent / "runtime"
        copy_tree(runtime_src, self.root / "rt" / "harnessctl_runtime")  # what was hashed
        precompile(self.root / "rt")  # used where the image's Python is the host's version
        read_only_tree(self.root / "rt")
        (self.root / "harnesses").mkdir(mode=0o755)
        (self.root / "envs").mkdir(mode=0o755)
        self.isolation = {
            "backend": "docker",
            "image": self.image,
            "filesystem": "private (read-only image; /harness, /rt read-only; /task writable)",
            "network": "none",
            "user": SANDBOX_USER,
            "init": "root, no capabilities, identity checked between rollouts",
            "cap_drop": "ALL",
            "no_new_privileges": True,
            "seccomp": "harnessctl (no ptrace, process_vm_*, SysV IPC, mqueue)",
            "read_only_rootfs": True,
            "pid_namespace": True,
            "rlimits": True,
            "cpus": self.cpus,
            "container": "fresh per rollout" if self.fresh else "warm, reused when clean",
        }

    def close(self) -> None:
        if self._remover is not None:
            self._remover.shutdown(wait=True)
            self._remover = None
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
        (home / "task").mkdir()
        _give_to_sandbox(home / "task")
        (home / "log").mkdir(mode=0o755)  # the host's: the sandbox user writes only its files
        os.chmod(home / "log", 0o755)
        mem = f"{limits.memory_mb}m"
        scratch = f"rw,nosuid,nodev,noexec,size={self.tmpfs_mb}m,nr_inodes={self.scratch_inodes}"
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
            [self.python, "-I", "-S", "-c", INIT],
            detach=True,
            name=f"hx-{self.run_id}-{home.name[2:]}",
            labels=self._labels(),
            network_mode="none",
            user=INIT_USER,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges", f"seccomp={self._seccomp}"],
            read_only=True,
            ipc_mode="private",
            tmpfs={"/tmp": scratch, "/dev/shm": scratch},
            mem_limit=mem,
            memswap_limit=mem,
            pids_limit=limits.nproc + 8,
            nano_cpus=int(self.cpus * 1e9),
            volumes=volumes,
            working_dir="/task",
            environment={"LANG": "C.UTF-8"},
        )
        return _Container(container, home, limits, _init_identity(container))

    def _acquire(self, limits: Limits) -> _Container:
        if not self.fresh:
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

    def _discard(self, warm: _Container, background: bool = False) -> None:
        """Kill a container (and every process in it); the next rollout gets a fresh one.
        ``background``: the container holds no process of a rollout any more (it was killed,
        or only its init is left), so it is removed off the rollout's clock."""
        with self._lock:
            if warm in self._all:
                self._all.remove(warm)
            if background and self._remover is None:
                self._remover = ThreadPoolExecutor(2, thread_name_prefix="hx-docker-rm")
            remover = self._remover if background else None
        if remover is not None:
            remover.submit(_remove, warm)
        else:
            _remove(warm)

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
            if not dst.exists():  # exactly the files hashed (harnessctl.trees)
                tmp = dst.with_name(name + ".partial")
                shutil.rmtree(tmp, ignore_errors=True)
                copy_tree(job.harness.path, tmp, expect=job.harness.hash)
                read_only_tree(tmp)
                tmp.rename(dst)
            self._harness_copies[job.harness.hash] = name
        return f"/harness/{name}"

    # --- one rollout -------------------------------------------------------------------
    def run(self, job: Job) -> SandboxResult:
        """Run one rollout in a clean container; never raises for engine failures."""
        started = time.monotonic()
        harness_dir = self._harness_dir(job)
        assert self.root is not None, "the sandbox is not started"
        env_path = ":".join(
            f"/{rel}" for rel in stage_packages(self.root, job.packages, self._copy_lock)
        )
        # a reused container that cannot be shown clean is replaced, once, by a fresh one
        for attempt in range(2):
            try:
                warm = self._acquire(job.limits)
            except Exception as exc:  # engine down, image gone, limits refused
                return self._infra(f"cannot create a container: {exc}", started)
            try:
                return self._exec(warm, job, harness_dir, env_path, started)
            except _Dirty as exc:
                self._discard(warm)
                if attempt or warm.rollouts == 0:  # even a fresh container was not clean
                    return self._infra(f"container not clean: {exc}", started)
            except Exception as exc:  # the engine failed mid-rollout: retried by the evaluator
                self._discard(warm)
                return self._infra(f"docker engine error: {type(exc).__name__}: {exc}", started)
        raise AssertionError("unreachable")  # pragma: no cover

    def _infra(self, message: str, started: float) -> SandboxResult:
        return SandboxResult(
            None, False, time.monotonic() - started, infra_error=message, isolation=self.isolation
        )

    def _prepare_logs(self, warm: _Container, token: str) -> None:
        """Recreate the rollout's log files and token file in the host's log directory."""
        log = warm.log_dir
        for entry in os.scandir(log):
            os.unlink(entry.path)  # the sandbox cannot write the directory: only ours are here
        for name, mode in (("stdout", 0o600), ("stderr", 0o600), ("token", 0o400)):
            fd = os.open(log / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                if name == "token":
                    os.write(fd, token.encode())
                if os.geteuid() == 0:
                    os.fchown(fd, 65534, 65534)
                    os.fchmod(fd, mode)
                else:  # rootless engines map users differently: let the sandbox user in
                    os.fchmod(fd, 0o444 if name == "token" else 0o666)
            finally:
                os.close(fd)

    def _exec(self, warm: _Container, job: Job, harness_dir: str, env_path: str, started: float):
        assert self.client is not None
        api = self.client.api
        if not copy_in(job.workdir, warm.task_dir):
            raise _Dirty("/task could not be emptied")
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            **job.env,
            RT_ENV_HARNESS: harness_dir,
            RT_ENV_ENV_PATH: env_path,
            RT_ENV_TASK: "/task",
        }
        # the token goes in a file the runtime reads, not in /proc/<pid>/environ
        token = env.pop(RT_ENV_TOKEN, "")
        self._prepare_logs(warm, token)
        if token:
            env[RT_ENV_TOKEN_FILE] = TOKEN_FILE
        warm.rollouts += 1
        exec_id = api.exec_create(
            warm.container.id,
            [self.python, "-I", "-S", "-c", BOOT],
            environment=env,
            user=SANDBOX_USER,
            workdir="/task",
        )["Id"]
        # attached, the engine ends the stream when the exec'd process exits: one wake-up
        # instead of ~100 engine calls a second (host CPU that two workers on two cores miss)
        stream = api.exec_start(exec_id, detach=False, socket=True)
        # the clock starts with the runtime, not with a first rollout's container creation
        deadline = functools.partial(job.deadline, time.monotonic())
        _wait_for_end(stream, deadline)
        timed_out = False
        info = api.exec_inspect(exec_id)
        while info.get("Running"):  # the end not seen on the stream (or timed out): poll
            if time.monotonic() >= deadline():
                timed_out = True
                break
            time.sleep(self.poll_s)
            info = api.exec_inspect(exec_id)
        exit_code = info.get("ExitCode")
        if not timed_out and exit_code != 0 and _died(warm.container):
            # the container died under the rollout (killed, engine restart): not the task's
            # fault, so an infrastructure error the evaluator retries
            self._discard(warm)
            return self._infra(f"container died (exit {exit_code})", started)
        if not timed_out and exit_code == SCRATCH_DIRTY and warm.rollouts > 1:
            raise _Dirty("an earlier rollout left scratch files the boot could not remove")
        clean = not timed_out and _only_init(warm)
        if not clean:
            # a timeout or processes left behind: kill them all with the container
            warm.container.kill()
        healthy = clean and not self.fresh
        stdout = read_tail(warm.log_dir / "stdout")
        stderr = read_tail(warm.log_dir / "stderr")
        copy_out(warm.task_dir, job.workdir)
        with contextlib.suppress(OSError):
            (warm.log_dir / "token").unlink()  # the token dies with the rollout
        if healthy:
            self._release(warm)
        else:
            self._discard(warm, background=True)
        return SandboxResult(
            exit_code=None if timed_out else exit_code,
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


def _remove(warm: _Container) -> None:
    # already gone or the engine is down: the reaper retries at close
    with contextlib.suppress(Exception):
        warm.container.remove(force=True)
    shutil.rmtree(warm.home, ignore_errors=True)


def _init_identity(container) -> tuple | None:
    """PID 1's host pid, start time, uid and executable, read on the host; None if unknown."""
    with contextlib.suppress(Exception):
        container.reload()
        pid = int(container.attrs["State"]["Pid"])
        if pid > 0:
            return process_identity(pid)
    return None


def _only_init(warm: _Container) -> bool:
    """Whether the container's only process is the init it was created with (same host pid,
    start time, uid and executable): then no rollout process survives and none took PID 1
    over. A container whose processes cannot be listed is not known clean."""
    if warm.init is None:
        return False
    pids = cgroup_pids(warm.container.id)
    if pids is None:
        try:
            procs = warm.container.top(ps_args="-eo pid").get("Processes") or []
            pids = [int(row[0]) for row in procs]
        except Exception:
            return False
    return pids == [warm.init[0]] and process_identity(warm.init[0]) == warm.init


def _wait_for_end(stream, deadline: Callable[[], float]) -> None:
    """Read the exec's attach stream until the engine closes it (the process exited) or the
    deadline passes (it moves on while the rollout waits on the host: asked again at least
    every second). The boot points stdout and stderr at the log files, so nothing of the
    rollout's output comes this way; whatever does is discarded."""
    raw = getattr(stream, "_sock", stream)
    try:
        while (left := deadline() - time.monotonic()) > 0:
            raw.settimeout(min(left, 1.0))
            try:
                chunk = raw.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                return
    except (TimeoutError, OSError):
        return  # the caller asks the engine either way
    finally:
        with contextlib.suppress(OSError):
            stream.close()


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
