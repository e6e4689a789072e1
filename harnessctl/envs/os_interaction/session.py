"""The agent's shell in a task container: one ``bash --login`` fed on stdin, read on stdout.

After each command (and when it starts) the shell prints a marker line with a fresh nonce:
the command's exit status, the shell's pid, its effective uid and its working directory
(:func:`marker_line`). The nonce is never written next to the marker in what the shell
reads, so an echo of the line (a shell error) cannot be taken for the marker; a marker that
reached the output of a stopped command is cut out of it (:func:`strip_markers`).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass

from . import trusted

#: Bytes of a command's output kept on the host (the rest is counted and dropped).
KEEP_BYTES = 64 * 1024
_ANY_MARKER = re.compile(rb"\n?__HX_[0-9a-f]{16}__ [^\n]*\n?")


@dataclass(frozen=True)
class User:
    """Who the agent's shell runs as when a new one starts (``su - jack`` in ``start``)."""

    uid: int
    gid: int
    home: str


@dataclass(frozen=True)
class Marker:
    """What the shell reported after a command: output before the marker and its fields."""

    output: bytes
    status: str
    pid: int | None
    uid: int | None
    cwd: str


def marker_line(nonce: str, status: str = '"$?"') -> str:
    """The shell command that prints the marker (``status``: a shell word)."""
    return f'printf \'\\n__HX_%s__ %s %s %s %s\\n\' \'{nonce}\' {status} "$$" "$EUID" "$PWD"\n'


def strip_markers(raw: bytes) -> bytes:
    """``raw`` without any marker line (a stopped command's output must not show one)."""
    return _ANY_MARKER.sub(b"\n", raw)


class Session:
    """``bash --login`` in the container (see the module docstring)."""

    def __init__(self, container_id: str, cwd: str, user: User | None = None) -> None:
        head = ["docker", "exec", "-i", "-w", cwd]
        if user is not None and user.uid != 0:
            head += ["-e", f"HOME={user.home}"]
        self.proc = subprocess.Popen(
            [*head, container_id, *trusted.agent_command("bash", "--login", user=user)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.buffer = bytearray()
        self.dropped = 0
        self.eof = False
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.pid: int | None = None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        stream = self.proc.stdout
        while True:
            chunk = os.read(stream.fileno(), 65536)
            with self.cond:
                if not chunk:
                    self.eof = True
                    self.cond.notify_all()
                    return
                self.buffer.extend(chunk)
                if len(self.buffer) > 2 * KEEP_BYTES:  # keep the head and the tail (marker)
                    cut = len(self.buffer) - KEEP_BYTES - 4096
                    self.dropped += cut
                    del self.buffer[KEEP_BYTES : KEEP_BYTES + cut]
                self.cond.notify_all()

    def send(self, text: str) -> bool:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(text.encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    def take(self) -> tuple[bytes, int]:
        with self.cond:
            data, dropped = bytes(self.buffer), self.dropped
            self.buffer.clear()
            self.dropped = 0
        return data, dropped

    def wait_marker(self, nonce: str, deadline: float, poll: float | None = None) -> Marker | None:
        """Wait for the marker of ``nonce``; None at the deadline, at the end of the stream,
        or when ``poll`` seconds pass first."""
        pattern = re.compile(rb"\n?__HX_" + nonce.encode() + rb"__ (\S+) (\S+) (\S+) ([^\n]*)\n")
        wake = time.monotonic() + poll if poll else deadline
        with self.cond:
            while True:
                match = pattern.search(self.buffer)
                if match:
                    pid, uid = match.group(2), match.group(3)
                    found = Marker(
                        output=bytes(self.buffer[: match.start()]),
                        status=match.group(1).decode("utf-8", "replace"),
                        pid=int(pid) if pid.isdigit() else None,
                        uid=int(uid) if uid.isdigit() else None,
                        cwd=match.group(4).decode("utf-8", "replace"),
                    )
                    del self.buffer[: match.end()]  # after reading the groups (a view)
                    return found
                now = time.monotonic()
                if self.eof or now >= min(deadline, wake):
                    return None
                self.cond.wait(min(deadline, wake) - now)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(Exception):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
