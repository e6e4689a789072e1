"""Is a run's process still alive? By pid and process start time on the same machine, by
heartbeat from another one; never by the run's age (a long run is not a dead one)."""

from __future__ import annotations

import os
import socket

HEARTBEAT_S = 15.0
"""How often a working run refreshes its heartbeat."""
HEARTBEAT_STALE_S = 8 * HEARTBEAT_S
"""A run on another machine whose heartbeat is older than this is taken for dead."""


def host() -> str:
    return socket.gethostname()


def process_started(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux ``/proc``), "" if unknown:
    with the pid it names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) "
    return fields[19] if len(fields) > 19 else ""


def this_process() -> tuple[str, int, str]:
    """(host, pid, start time) of the calling process."""
    pid = os.getpid()
    return host(), pid, process_started(pid)


def alive(
    run_host: str, pid: int | None, started: str, heartbeat_at: float | None, now: float
) -> bool:
    """Whether the process a run recorded is still running."""
    if run_host and run_host == host() and pid:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's live process
            pass
        return not started or process_started(pid) in ("", started)
    if heartbeat_at is None:
        return True  # a run from before liveness was recorded: nothing to judge by
    return now - heartbeat_at <= HEARTBEAT_STALE_S
