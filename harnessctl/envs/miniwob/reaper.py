"""The browsers' reaper: one small process per owner that kills the owner's browsers as soon as
the owner is gone, however it went (a SIGKILL included, which no ``atexit`` survives).

The owner (a process whose :class:`~.browser.BrowserPool` started a browser) starts it once,
``python -I reaper.py <owner pid>``, in a session of its own (a Ctrl-C or a kill of the
owner's process group does not reach it) with a pipe on its standard input whose write end
only the owner holds (the pipe's descriptor is not inherited across ``exec``, and a child
forked without one closes its copy: :mod:`.browser`). Every chromedriver is started in a
session of its own too, so its process group holds the driver, Chromium and every helper
Chromium forks. The owner writes one JSON line per change:

- ``{"add": <pgid>, "started": "<start time>", "profile": "<dir>"}`` when a browser's
  chromedriver (the leader of the group) has started,
- ``{"drop": <pgid>}`` when the owner quit that browser itself.

When the pipe ends (the owner closed it or died: the kernel closes a dead process's
descriptors) or the owner's pid no longer names the process it was, the reaper SIGKILLs every
group still registered, and every process whose command line names one of their profiles
(Chromium's crash handler starts a session of its own), waits until they are gone, removes
their profile directories and exits. A normal exit has quit every browser first, so the
reaper finds nothing left. Standard library only, and nothing of harnessctl is imported when
it runs as a script: it starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import sys
import time

#: How often the reaper checks that its owner still runs (the pipe's end is the main signal).
POLL_S = 0.5
#: How long a killed browser may take to be gone before its profile is removed anyway.
GRACE_S = 5.0


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (``/proc/<pid>/stat`` field 22), which tells a pid
    from a later process that reused it; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its parent is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [part.decode(errors="replace") for part in fh.read().split(b"\0") if part]
    except OSError:
        return []


def _group(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return 0


def kill_browsers(groups: dict[int, str | None], pids: set[int], profiles: set[str]) -> list[int]:
    """SIGKILL the process groups ``groups`` (pgid -> its leader's start time), the processes
    ``pids`` and every process whose command line names one of ``profiles``; wait until they
    are gone (at most ``GRACE_S``), then remove the profiles until they stay gone (a dying
    helper may still write into one). The pids killed, sorted.

    A group whose leader runs with another start time is another's (its id was reused after
    ours ended) and is left alone; while any member of ours lives, its id cannot be reused."""
    ours = {
        g for g, born in groups.items() if not running(g) or born is None or start_time(g) == born
    }
    victims = set(pids)
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid == os.getpid():
            continue
        if (ours and _group(pid) in ours) or (
            profiles and any(p in a for a in cmdline(pid) for p in profiles)
        ):
            victims.add(pid)
    for group in ours:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)
    for pid in victims:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + GRACE_S
    while any(running(pid) for pid in victims) and time.monotonic() < deadline:
        time.sleep(0.05)
    while profiles:
        for profile in profiles:
            shutil.rmtree(profile, ignore_errors=True)
        if not any(os.path.exists(p) for p in profiles) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return sorted(victims)


def watch(owner: int, stream) -> None:
    """Read the owner's lines from ``stream`` (a binary pipe) until it ends or the owner is
    gone, then kill what is still registered."""
    born = start_time(owner)
    browsers: dict[int, tuple[str | None, str]] = {}
    buffer = b""
    fd = stream.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], POLL_S)
        if not ready:
            if born is None or start_time(owner) != born:
                break
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # only the owner writes here; a torn line is skipped, not fatal
            if isinstance(message, dict) and isinstance(message.get("add"), int):
                started = message.get("started")
                profile = str(message.get("profile") or "")
                browsers[message["add"]] = (started if isinstance(started, str) else None, profile)
            elif isinstance(message, dict) and isinstance(message.get("drop"), int):
                browsers.pop(message["drop"], None)
    if browsers:
        groups = {group: started for group, (started, _) in browsers.items()}
        kill_browsers(groups, set(), {profile for _, profile in browsers.values() if profile})


def main(argv: list[str]) -> int:
    # the owner's terminal signals are not for the reaper: it must outlive its owner
    for name in ("SIGINT", "SIGHUP"):
        with contextlib.suppress(OSError, ValueError):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: reaper.py <owner pid>", file=sys.stderr)
        return 2
    watch(int(argv[1]), sys.stdin.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
