"""One task container per episode, driven from the host with the docker CLI.

The container runs the offline task image (``scripts/build-os-image.sh``) with no network and
bounded processes (pids), memory, CPU, file size (``RLIMIT_FSIZE``) and a size-limited
``/tmp``; its writable layer is measured while a command runs and the command is stopped
past ``disk_mb`` (the engine's overlay2 on ext4 cannot cap a layer's size itself). It carries
the docker sandbox's labels (``harnessctl=1``, run, owning pid and host), so the sandbox's
reaper removes it when its owner is gone.

Two ways in, as AgentBench has them:

- :meth:`TaskContainer.run_script` runs a script on its own (``bash -c CODE -- ARGS`` or
  ``python3 -c CODE ARGS``): init scripts and the checks;
- :meth:`TaskContainer.bash` runs the agent's command in one long-lived ``bash --login``
  session (working directory and variables persist between commands), its stdin from
  ``/dev/null`` (an interactive program sees end of input instead of the next command), with
  a time limit: past it, or past the disk limit, every process the host did not start is
  stopped (:mod:`.processes`) and a fresh session starts in the same directory, as the same
  user. ``start`` is typed into the session as it is (:meth:`TaskContainer.run_start`), as
  AgentBench types it into its shell: a ``su - jack`` in it leaves the agent in ``jack``'s
  shell.

A session that cannot start again while the container answers the host (the agent appended
``exit`` to ``/etc/profile``, removed ``bash``) is the agent's doing: :class:`SessionBroken`,
which the episode scores as a failure. Only what the host cannot do (the engine does not
answer, no process can start even after a restart) is a :class:`ContainerError`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field

from ... import bounds
from . import trusted
from .processes import KILL_ALL, LIST, hosts_processes, parse_listing
from .session import Marker, Session, User, marker_line, strip_markers

DEFAULT_IMAGE = "harnessctl-os:latest"
DOCKER_TIMEOUT_S = 60.0
SESSION_START_S = 30.0
# (10 s ran out under a loaded two-core machine: docker exec alone took seconds there)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: Docker's default capabilities that no task uses (no network; no device nodes, file
#: capabilities or chroot in AgentBench's tasks). The agent's shell drops one more
#: (``trusted.AGENT_DROPS``) so that it cannot reach into a check.
DROPPED_CAPS = ("NET_RAW", "MKNOD", "SETFCAP", "SYS_CHROOT")


#: Every path of the container's own filesystem, sorted (``-xdev``: not ``/proc``, ``/tmp``,
#: ``/.hx``); the checks' tools run it.
_LIST_PATHS = "LC_ALL=C find / -xdev -print 2>/dev/null | LC_ALL=C sort"


class ContainerError(RuntimeError):
    """The engine could not start or reach the task container (an infrastructure error)."""


class SessionBroken(RuntimeError):
    """The agent's shell cannot start again, though the container answers the host: what
    the agent did to its own system (a scored failure, never an infrastructure error)."""


@dataclass(frozen=True)
class Limits:
    """What one task container may use."""

    command_timeout_s: float = 20.0
    pids: int = 256
    memory_mb: int = 512
    cpus: float = 1.0
    file_mb: int = 64  # RLIMIT_FSIZE: the largest file a process may write
    tmp_mb: int = 64  # /tmp is a tmpfs of this size
    disk_mb: int = 256  # the writable layer, measured all the time the container lives
    files: int = 20_000  # entries in the writable layer (an empty file costs an inode, no byte)
    disk_poll_s: float = 1.0  # docker inspect --size, when the layer is not readable here
    layer_poll_s: float = 0.2  # the layer's directory walked from the host


@dataclass
class CommandResult:
    """What one command in the session did."""

    output: str
    exit_code: int | None  # None: stopped before it finished
    seconds: float
    #: "timeout" or "disk" when the command was stopped; "pids" when no process could start
    #: after it (the container was restarted)
    limit: str | None = None
    session_ended: bool = False  # the command ended the shell (``exit``); a new one started
    dropped_bytes: int = 0
    #: the writable layer (MiB, entries) measured after the stop, when it was stopped at the
    #: disk limit: what the stop left, not what crossed the limit
    usage: tuple[float, int] | None = None


def clean_text(raw: bytes) -> str:
    """Decoded output with control characters (bar newline and tab) removed."""
    return _CONTROL.sub("", raw.decode("utf-8", errors="replace").replace("\r\n", "\n"))


def labels(run_id: str) -> dict[str, str]:
    """The docker sandbox's labels, so its reaper finds orphans (owner pid gone)."""
    return {
        "harnessctl": "1",
        "harnessctl.run": run_id,
        "harnessctl.pid": str(os.getpid()),
        "harnessctl.host": socket.gethostname(),
        "harnessctl.kind": "os_interaction",
    }


def docker(*args: str, timeout: float = DOCKER_TIMEOUT_S, check: bool = True) -> str:
    """Run the docker CLI; ``ContainerError`` when it fails (and ``check``) or hangs."""
    if shutil.which("docker") is None:
        raise ContainerError("the docker CLI is not installed (the task container needs it)")
    try:
        done = subprocess.run(["docker", *args], capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ContainerError(f"docker {args[0]} did not answer within {timeout:.0f}s") from None
    if check and done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()[-500:]
        raise ContainerError(f"docker {args[0]} failed: {message}")
    return done.stdout.decode("utf-8", "replace")


def image_present(image: str) -> bool:
    try:
        docker("image", "inspect", image)
    except ContainerError:
        return False
    return True


_image_ids: dict[str, str] = {}


def image_id(image: str) -> str | None:
    """The image's id (once per process: the cache identity asks for every request), or None
    when no engine answers or the image is not there (not remembered: it may be built)."""
    if image not in _image_ids:
        try:
            _image_ids[image] = docker("image", "inspect", "-f", "{{.Id}}", image).strip()
        except ContainerError:
            return None
    return _image_ids[image]


#: The host's watcher of its task containers, a process of its own session: it reads
#: container ids (``-ID`` forgets one) and, when its stdin ends (the host exited, however it
#: died: the pipe closes with the last process holding it), removes every one it still holds.
WATCHER = """
import subprocess, sys
held = set()
for line in sys.stdin:
    line = line.strip()
    if line.startswith("-"):
        held.discard(line[1:])
    elif line:
        held.add(line)
for cid in held:
    subprocess.run(["docker", "rm", "-f", cid], capture_output=True, timeout=60)
"""
_watcher: subprocess.Popen[str] | None = None
_watcher_pid = 0  # the process that started it (a forked child starts its own)
_watcher_lock = threading.Lock()


def watch_container(container_id: str, *, forget: bool = False) -> None:
    """Have the host's watcher remove ``container_id`` if the host dies before closing it
    (``forget``: closed normally). A SIGKILLed host leaves no task container running."""
    global _watcher, _watcher_pid
    with _watcher_lock:
        if _watcher is None or _watcher_pid != os.getpid() or _watcher.poll() is not None:
            if forget:
                return
            _watcher = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", WATCHER],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
                start_new_session=True,  # a kill of the host's process group spares it
            )
            _watcher_pid = os.getpid()
        assert _watcher.stdin is not None
        with contextlib.suppress(OSError):
            _watcher.stdin.write(f"{'-' if forget else ''}{container_id}\n")
            _watcher.stdin.flush()


def _walk_usage(root: str) -> tuple[float, int]:
    """Bytes on disk (MiB) and entries under ``root``, links not followed."""
    total, entries = 0, 0
    stack = [root]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    entries += 1
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return total / (1024 * 1024), entries


def reap_orphans() -> int:
    """Remove labelled containers whose owning process is gone (the sandbox's reaper)."""
    try:
        import docker as docker_sdk

        from harnessctl.sandbox.docker_reaper import reap_containers
    except ImportError:
        return 0
    try:
        client = docker_sdk.from_env()
    except Exception:  # no engine: nothing to reap
        return 0
    try:
        return reap_containers(client)
    finally:
        client.close()


@dataclass
class TaskContainer:
    """One running task container (see the module docstring)."""

    image: str = DEFAULT_IMAGE
    limits: Limits = field(default_factory=Limits)
    run_id: str = field(default_factory=lambda: f"os-{uuid.uuid4().hex[:12]}")
    id: str | None = None
    cwd: str = "/"
    user: User | None = None  # the agent's shell's user, when not root
    start_code: str | None = None
    restarts: int = 0
    #: Limits the monitor enforced while no command ran (a background writer): each a dict
    #: with ``limit`` ("disk"), ``mb`` and ``files`` (measured after the stop); the episode
    #: takes them as events.
    background: list[dict] = field(default_factory=list)
    #: ``PID:STARTTIME`` of the processes the host started (:mod:`.processes`): spared by
    #: the limits, which stop every other process
    hosts: list[str] = field(default_factory=list)
    #: A check's environment (``trusted.check_env`` of the container's configuration)
    check_env: list[str] = field(default_factory=trusted.check_env)
    _session: Session | None = None
    _upper: str | None = None  # the writable layer's directory on the host, when readable
    _busy: bool = False  # a command of the agent is running (bash() measures then)
    _armed: bool = False  # the episode has begun: the monitor enforces the disk limits
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        lim = self.limits
        try:
            tools = trusted.ensure_tools(self.image, docker)
        except trusted.ToolsError as exc:
            raise ContainerError(str(exc)) from None
        name = f"hx-{self.run_id}-{secrets.token_hex(4)}"
        label_args = [a for k, v in labels(self.run_id).items() for a in ("--label", f"{k}={v}")]
        self.id = docker(
            "run", "-d", "--name", name, *label_args,
            "--network", "none",
            "--pids-limit", str(lim.pids),
            "--memory", f"{lim.memory_mb}m", "--memory-swap", f"{lim.memory_mb}m",
            "--cpus", str(lim.cpus),
            "--ulimit", f"fsize={lim.file_mb * 1024 * 1024}",
            "--tmpfs", f"/tmp:rw,size={lim.tmp_mb}m",
            "--security-opt", "no-new-privileges",
            *(a for cap in DROPPED_CAPS for a in ("--cap-drop", cap)),
            "--mount", f"type=volume,src={tools},dst={trusted.PREFIX},readonly",
            "--hostname", "harnessctl-os",
            "-w", "/",
            self.image, *trusted.init_command(),
        ).strip()  # fmt: skip
        watch_container(self.id)
        inspected = docker(
            "container", "inspect", "-f",
            "{{.GraphDriver.Data.UpperDir}}\n{{json .Config.Env}}", self.id,
        ).split("\n")  # fmt: skip
        upper = inspected[0].strip()
        self._upper = upper if upper.startswith("/") and os.access(upper, os.R_OK) else None
        with contextlib.suppress(ValueError, IndexError):
            self.check_env = trusted.check_env(json.loads(inspected[1]) or [])
        # AgentBench opens the agent's shell with the container, before the init scripts
        self._session = self._open_session()
        threading.Thread(target=self._monitor, name="hx-os-disk", daemon=True).start()

    def arm(self) -> None:
        """The episode begins: record the host's processes (what setup left running) and
        enforce the disk limits from now on (a setup that writes much is the task's)."""
        self.hosts = self._hosts_processes()
        self._armed = True

    def _monitor(self) -> None:
        """The disk limits between commands: a process the agent left running (``nohup
        writer &``) is stopped once the layer passes ``disk_mb`` or ``files``."""
        over = False
        every = self.limits.layer_poll_s if self._upper else self.limits.disk_poll_s
        while not self._closed.wait(every):
            with self._lock:
                if self._busy or not self._armed or self.id is None:
                    continue
                try:
                    mb, files = self.layer_usage()
                except ContainerError:
                    continue
                if self._over(mb, files):
                    if not over:  # once per crossing: files already written stay
                        self._stop_commands()
                        with contextlib.suppress(ContainerError):
                            mb, files = self.layer_usage()  # what the stop left
                        self.background.append(
                            {"limit": "disk", "mb": round(mb, 1), "files": files}
                        )
                    over = True
                else:
                    over = False

    def _over(self, mb: float, files: int) -> bool:
        return mb > self.limits.disk_mb or files > self.limits.files

    # --- scripts on their own ---------------------------------------------------------
    def run_script(
        self,
        language: str,
        code: str,
        params: tuple[str, ...] = (),
        timeout: float = 30.0,
        *,
        trusted_tools: bool = False,
    ) -> tuple[int | None, str]:
        """Run ``code`` apart from the session (exit code, output); exit code None: it did
        not finish within ``timeout``. ``trusted_tools``: with the read-only copy of the
        image's tools (a check: see :mod:`.trusted`), else with the container's own (the
        task's setup, before the agent has touched it)."""
        assert self.id is not None, "start() the container first"
        if trusted_tools:
            cmd = trusted.check_command(language, code, params, self.check_env)
        elif language == "python":
            cmd = ["python3", "-c", code, *params]
        else:
            cmd = ["bash", "-c", code, *(("--", *params) if params else ())]
        try:
            proc = subprocess.Popen(
                ["docker", "exec", "-w", "/", self.id, *cmd],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, ValueError) as exc:  # arguments no program can take (E2BIG, NUL)
            return 126, f"the check could not start with these arguments: {exc}"
        kept = bytearray()

        def drain() -> None:  # keep the first CHECK_OUTPUT_BYTES, read and drop the rest
            assert proc.stdout is not None
            for chunk in iter(lambda: proc.stdout.read(65536), b""):  # type: ignore[union-attr]
                if len(kept) < bounds.CHECK_OUTPUT_BYTES:
                    kept.extend(chunk[: bounds.CHECK_OUTPUT_BYTES - len(kept)])

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None, ""
        finally:
            reader.join(timeout=5)
        return status, clean_text(bytes(kept))

    def mark_paths(self) -> None:
        """Record every path of the container's own filesystem (not ``/proc``, ``/tmp`` or
        the other mounts), in the container's ``/tmp``, for :meth:`added_paths`."""
        self.run_script("bash", _LIST_PATHS + " > /tmp/.hx-paths", timeout=60, trusted_tools=True)

    def added_paths(self) -> list[str]:
        """The paths added since :meth:`mark_paths` (the record is removed)."""
        status, out = self.run_script(
            "bash",
            _LIST_PATHS + " | comm -13 /tmp/.hx-paths -; rm -f /tmp/.hx-paths",
            timeout=60,
            trusted_tools=True,
        )
        return [line for line in out.split("\n") if line.startswith("/")] if status == 0 else []

    def remove(self, paths: list[str]) -> None:
        """Remove ``paths`` with the checks' tools, deepest first."""
        ordered = sorted(paths, key=lambda x: x.count("/"), reverse=True)
        for start in range(0, len(ordered), 200):
            self.run_script(
                "bash", 'rm -rf -- "$@"', tuple(ordered[start : start + 200]), trusted_tools=True
            )

    # --- the agent's session ----------------------------------------------------------
    def run_start(self, code: str) -> None:
        """Type the task's ``start`` script into the agent's shell as AgentBench does: what
        it sets stays set, a directory it enters or a user it becomes (``su - jack``) is the
        agent's, what it leaves running keeps running (the host's: :meth:`arm` records it).
        Run again in the fresh shell after a restart. A ``start`` that never gives the shell
        back (a program in the foreground) keeps it: the agent gets a new shell."""
        assert self.id is not None, "start() the container first"
        self.start_code = code
        if self._session is None or self._session.eof:
            self._session = self._open_session()
        session = self._session
        session.take()
        nonce = secrets.token_hex(8)
        session.send(code + "\n" + marker_line(nonce))
        found = session.wait_marker(nonce, time.monotonic() + self.limits.command_timeout_s)
        if found is not None:
            self._follow(found)
            session.pid = found.pid or session.pid
            return
        self._session = None  # left to its program (the host's); the agent gets a new shell
        self._session = self._open_session()

    def _follow(self, found: Marker) -> None:
        """Keep the shell's directory and user for the next shell (after a stop)."""
        if found.cwd.startswith("/"):
            self.cwd = found.cwd
        if found.uid is not None and found.uid != (self.user.uid if self.user else 0):
            self.user = self._user(found.uid)

    def _user(self, uid: int) -> User | None:
        """The passwd entry of ``uid`` (read with the checks' tools: their name service is
        ``files`` whatever the agent wrote), for the shell that replaces the agent's."""
        if uid == 0:
            return None
        status, out = self.run_script(
            "bash", 'getent passwd "$1"', (str(uid),), timeout=10, trusted_tools=True
        )
        fields = out.strip().split(":")
        if status == 0 and len(fields) >= 6 and fields[3].isdigit():
            return User(uid, int(fields[3]), fields[5] or "/")
        return User(uid, uid, "/")

    def _hosts_processes(self) -> list[str]:
        session = self._session
        shell = session.pid if session is not None else None
        status, out = self.run_script("bash", LIST, timeout=20, trusted_tools=True)
        if status != 0:
            raise ContainerError("the task container's processes could not be listed")
        return hosts_processes(parse_listing(out), shell)

    def _open_session(self) -> Session:
        assert self.id is not None
        session = Session(self.id, self.cwd, self.user)
        nonce = secrets.token_hex(8)
        session.send(marker_line(nonce, "0"))
        found = session.wait_marker(nonce, time.monotonic() + SESSION_START_S)
        if found is None:
            session.close()
            if session.eof and self.cwd != "/":  # its directory is gone: start in /
                self.cwd = "/"
                return self._open_session()
            if self._answers():
                raise SessionBroken(
                    "the shell could not start again (it ended before reading a command: "
                    "a profile that exits, a missing or broken bash)"
                )
            raise ContainerError("the task container's shell did not start")
        session.pid = found.pid
        return session

    def _answers(self) -> bool:
        """Whether the container runs a program of the host's (the checks' ``true``)."""
        assert self.id is not None
        try:
            done = subprocess.run(
                ["docker", "exec", self.id, f"{trusted.PREFIX}/usr/bin/true"],
                capture_output=True, timeout=20, check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    def disk_used_mb(self) -> float:
        """The container's writable layer, in MiB."""
        return self.layer_usage()[0]

    def layer_usage(self) -> tuple[float, int]:
        """The writable layer's size in MiB and its number of entries. Read from the layer's
        directory on the host when it is readable there (overlay2, a root engine), which
        counts entries too; else ``docker inspect --size`` (bytes only)."""
        assert self.id is not None
        if self._upper is not None:
            return _walk_usage(self._upper)
        out = docker("container", "inspect", "--size", "-f", "{{.SizeRw}}", self.id).strip()
        try:
            return int(out) / (1024 * 1024), 0
        except ValueError:
            return 0.0, 0

    def _stop_commands(self) -> bool:
        """Stop every process the host did not start (:data:`KILL_ALL`); False when no
        process could start in the container to do it."""
        assert self.id is not None
        try:
            done = subprocess.run(
                [
                    "docker",
                    "exec",
                    self.id,
                    *trusted.check_command("bash", KILL_ALL, tuple(self.hosts), self.check_env),
                ],
                capture_output=True,
                timeout=20,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    def bash(self, command: str) -> CommandResult:
        """Run one command of the agent in the session (see the module docstring)."""
        assert self.id is not None, "start() the container first"
        if self._session is None or self._session.eof:
            self._session = self._open_session()
        session = self._session
        session.take()  # late output of background jobs from earlier commands
        nonce = secrets.token_hex(8)
        encoded = base64.b64encode(command.encode("utf-8")).decode("ascii")
        # bash's parser is left broken after an ``eval`` of bad syntax, so the syntax is
        # checked first (``bash -n``)
        script = (
            f"__hx_c=\"$(printf %s '{encoded}' | base64 -d)\"; "
            'if __hx_e="$(bash -n -c "$__hx_c" 2>&1)"; then '
            '{ eval "$__hx_c"; } </dev/null 2>&1; '
            "else printf '%s\\n' \"$__hx_e\"; (exit 2); fi; "
            "__hx_rc=$?; " + marker_line(nonce, '"$__hx_rc"')
        )
        started = time.monotonic()
        deadline = started + self.limits.command_timeout_s
        with self._lock:
            self._busy = True
        try:
            return self._run_command(session, script, nonce, started, deadline)
        finally:
            with self._lock:
                self._busy = False

    def _run_command(
        self, session: Session, script: str, nonce: str, started: float, deadline: float
    ) -> CommandResult:
        assert self.id is not None
        # a layer left over the limit (by a writer stopped before) stops only a command that
        # makes it grow: the agent can still look around and remove files
        base = self.layer_usage()
        sent = session.send(script)
        limit: str | None = None
        found = None
        while sent:
            poll = self.limits.layer_poll_s if self._upper else self.limits.disk_poll_s
            found = session.wait_marker(nonce, deadline, poll=poll)
            if found is not None or session.eof:
                break
            if time.monotonic() >= deadline:
                limit = "timeout"
                break
            usage = self.layer_usage()
            if self._over(*usage) and (usage[0] > base[0] + 0.05 or usage[1] > base[1]):
                limit = "disk"
                break
        if found is None and limit is not None:  # it may have finished meanwhile: say so
            found = session.wait_marker(nonce, time.monotonic(), poll=0.01)
        seconds = time.monotonic() - started
        if found is not None:
            _, dropped = session.take()
            self._follow(found)
            code = int(found.status) if found.status.lstrip("-").isdigit() else None
            return CommandResult(clean_text(found.output), code, seconds, dropped_bytes=dropped)
        # stopped at a limit, or the command ended the shell: a fresh session, same directory
        stopped = self._stop_commands() if limit is not None else True
        left: tuple[float, int] | None = None
        if limit == "disk":
            with contextlib.suppress(ContainerError):
                left = self.layer_usage()  # what the stop left
        session.close()
        raw, dropped = session.take()
        self._session = None
        try:
            if not stopped:
                raise ContainerError("no process could start to stop the command")
            self._session = self._open_session()
        except ContainerError:
            # no process can start (a fork bomb holds every pid): restart the container,
            # which stops every process in it, keeps its files, and starts `start` again
            self.restarts += 1
            docker("restart", "-t", "0", self.id, timeout=DOCKER_TIMEOUT_S)
            self._session = self._open_session()
            if self.start_code is not None:
                self.run_start(self.start_code)
            self.hosts = self._hosts_processes()
            limit = "pids"
        return CommandResult(
            clean_text(strip_markers(raw)), None, seconds, limit=limit,
            session_ended=limit is None, dropped_bytes=dropped, usage=left,
        )  # fmt: skip

    def close(self) -> None:
        self._closed.set()
        if self._session is not None:
            self._session.close()
            self._session = None
        if self.id is not None:
            with contextlib.suppress(ContainerError):
                docker("rm", "-f", self.id, timeout=30, check=False)
            watch_container(self.id, forget=True)
            self.id = None
