"""Finding and removing harnessctl's containers, and counting the processes in one.

Every container carries ``harnessctl=1``, ``harnessctl.run``, and the owning process and
host. At start, containers whose owner is gone (a killed run) are removed; containers of
another live run, e.g. a concurrent ``harnessctl eval``, are left alone. At close, the
run removes its own.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

# cgroup v1 and the two common v2 layouts (cgroupfs and systemd drivers)
PIDS_FILES = (
    "/sys/fs/cgroup/pids/docker/{id}/pids.current",
    "/sys/fs/cgroup/docker/{id}/pids.current",
    "/sys/fs/cgroup/system.slice/docker-{id}.scope/pids.current",
)


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
