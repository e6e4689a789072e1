"""Finding and removing harnessctl's containers and work directories; a container's processes.

Every container carries ``harnessctl=1``, ``harnessctl.run``, and the owning process and
host. Every work directory (``hxdk-*`` in the temporary directory) holds an ``owner`` file:
the owning process's pid, its start time and the host. At start, containers and work
directories whose owner is gone (a run killed with SIGKILL) are removed; those of another
live run, e.g. a concurrent ``harnessctl eval``, are left alone. At close, the run removes
its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import time
from pathlib import Path

WORKDIR_PREFIX = "hxdk-"
OWNER_FILE = "owner"
UNMARKED_GRACE_S = 3600.0  # an unmarked work directory (an older version's) this old is stale

# cgroup v1 and the two common v2 layouts (cgroupfs and systemd drivers)
CGROUP_DIRS = (
    "/sys/fs/cgroup/pids/docker/{id}",
    "/sys/fs/cgroup/docker/{id}",
    "/sys/fs/cgroup/system.slice/docker-{id}.scope",
)
PIDS_FILES = tuple(d + "/pids.current" for d in CGROUP_DIRS)


def _owner_alive(labels: dict) -> bool:
    if labels.get("harnessctl.host") != socket.gethostname():
        return True  # another machine's engine view: not ours to judge
    try:
        pid = int(labels.get("harnessctl.pid", ""))
    except ValueError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_containers(client, run_id: str | None = None) -> int:
    """Remove this run's containers (``run_id``) or every orphan; returns how many."""
    removed = 0
    try:
        containers = client.containers.list(all=True, filters={"label": "harnessctl=1"})
    except Exception:  # engine unreachable: nothing to reap now, the next start retries
        return 0
    for container in containers:
        labels = container.labels or {}
        if run_id is not None:
            doomed = labels.get("harnessctl.run") == run_id
        else:
            doomed = not _owner_alive(labels)
        if doomed:
            with contextlib.suppress(Exception):  # raced with another reaper: gone is gone
                container.remove(force=True)
                removed += 1
    return removed


def live_pid_count(container_id: str) -> int | None:
    """Processes alive in the container, read from its pids cgroup; None if unknown."""
    for pattern in PIDS_FILES:
        path = Path(pattern.format(id=container_id))
        with contextlib.suppress(OSError, ValueError):
            return int(path.read_text().strip())
    return None


def cgroup_pids(container_id: str) -> list[int] | None:
    """Host pids of every process in the container (its cgroup's ``cgroup.procs``, sorted);
    None if the cgroup is not found."""
    for pattern in CGROUP_DIRS:
        path = Path(pattern.format(id=container_id)) / "cgroup.procs"
        with contextlib.suppress(OSError, ValueError):
            return sorted(int(line) for line in path.read_text().split())
    return None


def process_identity(pid: int) -> tuple | None:
    """(pid, start time in clock ticks since boot, real uid, executable) of a host process;
    None if it is gone. A reused pid has another start time."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        start = int(raw[raw.rindex(")") + 2 :].split()[19])
        uid = os.stat(f"/proc/{pid}").st_uid
    except (OSError, ValueError, IndexError):
        return None
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except PermissionError:  # another user's process seen by a non-root host
        exe = ""
    except OSError:
        return None
    return (pid, start, uid, exe)


def _owner_line() -> str:
    ident = process_identity(os.getpid())
    start = ident[1] if ident else 0
    return f"{os.getpid()} {start} {socket.gethostname()}\n"


def mark_workdir(path: Path) -> None:
    """Record this process as the owner of a work directory (see :func:`reap_workdirs`)."""
    (path / OWNER_FILE).write_text(_owner_line())
    os.chmod(path / OWNER_FILE, 0o644)


def _workdir_stale(path: Path) -> bool:
    try:
        fd = os.open(path / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:  # being created now, or an older version's: judge by age
        with contextlib.suppress(OSError):
            return time.time() - os.lstat(path).st_mtime > UNMARKED_GRACE_S
        return False
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        pid_s, start_s, host = os.read(fd, 512).decode("utf-8", "replace").split()[:3]
        pid, start = int(pid_s), int(start_s)
    except (OSError, ValueError):
        return False
    finally:
        os.close(fd)
    if host != socket.gethostname():
        return False  # a shared temporary directory: not ours to judge
    ident = process_identity(pid)
    if ident is None:
        # gone, or /proc hides it: fall back to a signal probe
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    return start != 0 and ident[1] != start  # the pid was reused by another process


def reap_workdirs(tmpdir: Path) -> int:
    """Remove the docker backend's work directories whose owning process is gone (a run
    killed with SIGKILL); returns how many. Only directories owned by this user."""
    removed = 0
    try:
        entries = list(os.scandir(tmpdir))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(WORKDIR_PREFIX):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        if _workdir_stale(Path(entry.path)):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
    return removed
