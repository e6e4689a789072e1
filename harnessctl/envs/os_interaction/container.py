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
  a time limit: past it, or past the disk limit, the session's process tree is killed and a
  fresh session starts in the same directory.
"""

from __future__ import annotations

import base64
import contextlib
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

DEFAULT_IMAGE = "harnessctl-os:latest"
DOCKER_TIMEOUT_S = 60.0
SESSION_START_S = 10.0
#: Bytes of a command's output kept on the host (the rest is counted and dropped).
KEEP_BYTES = 64 * 1024
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: Stop every process of the container but its init and the task's ``start``
#: program (marked by ``HX_START=1`` in its environment, which its children inherit): a
#: command's processes reparent to init when their parent dies, so a tree kill would miss
#: them. Builtins only (no fork): it runs even when a fork bomb holds nearly every pid;
#: every victim is stopped before any is killed, so none can fork a replacement.
KILL_ALL = r"""
keep=" 1 $$ "
for round in 1 2 3 4 5 6; do
  victims=""
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$keep" in *" $p "*) continue;; esac
    started=0
    while IFS= read -r -d '' kv; do
      [ "$kv" = HX_START=1 ] && started=1 && break
    done < "$d/environ" 2>/dev/null
    [ "$started" = 1 ] && continue
    victims="$victims $p"
  done
  [ -z "$victims" ] && exit 0
  kill -STOP $victims 2>/dev/null
  kill -KILL $victims 2>/dev/null
done
exit 0
"""
START_MARK = "HX_START=1"
#: Docker's default capabilities that no task uses (no network; no device nodes, file
#: capabilities or chroot in AgentBench's tasks). The agent's shell drops one more
#: (``trusted.AGENT_DROPS``) so that it cannot reach into a check.
DROPPED_CAPS = ("NET_RAW", "MKNOD", "SETFCAP", "SYS_CHROOT")


class ContainerError(RuntimeError):
    """The engine could not start or reach the task container (an infrastructure error)."""


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


class _Session:
    """A ``bash --login`` in the container, fed commands on stdin, read on stdout."""

    def __init__(self, container_id: str, cwd: str) -> None:
        self.proc = subprocess.Popen(
            [
                "docker",
                "exec",
                "-i",
                "-w",
                cwd,
                container_id,
                *trusted.agent_command("bash", "--login"),
            ],  # fmt: skip
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

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(Exception):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)


@dataclass
class TaskContainer:
    """One running task container (see the module docstring)."""

    image: str = DEFAULT_IMAGE
    limits: Limits = field(default_factory=Limits)
    run_id: str = field(default_factory=lambda: f"os-{uuid.uuid4().hex[:12]}")
    id: str | None = None
    cwd: str = "/"
    start_code: str | None = None
    restarts: int = 0
    #: Limits the monitor enforced while no command ran (a background writer): each a dict
    #: with ``limit`` ("disk"), ``mb`` and ``files``; the episode takes them as events.
    background: list[dict] = field(default_factory=list)
    _session: _Session | None = None
    _upper: str | None = None  # the writable layer's directory on the host, when readable
    _busy: bool = False  # a command of the agent is running (bash() measures then)
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
        upper = docker(
            "container", "inspect", "-f", "{{.GraphDriver.Data.UpperDir}}", self.id
        ).strip()
        self._upper = upper if upper.startswith("/") and os.access(upper, os.R_OK) else None
        self._session = self._open_session()
        threading.Thread(target=self._monitor, name="hx-os-disk", daemon=True).start()

    def _monitor(self) -> None:
        """The disk limits between commands: a process the agent left running (``nohup
        writer &``) is stopped once the layer passes ``disk_mb`` or ``files``."""
        over = False
        every = self.limits.layer_poll_s if self._upper else self.limits.disk_poll_s
        while not self._closed.wait(every):
            with self._lock:
                if self._busy or self.id is None:
                    continue
                try:
                    mb, files = self.layer_usage()
                except ContainerError:
                    continue
                if self._over(mb, files):
                    if not over:  # once per crossing: files already written stay
                        self._stop_commands()
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
            cmd = trusted.check_command(language, code, params)
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

    def run_start(self, code: str) -> None:
        """Run the task's ``start`` script in the agent's shell, as AgentBench does (what it
        sets stays set; what it leaves running, marked ``HX_START``, is spared by the
        command limits); run again in the fresh shell after a restart."""
        assert self.id is not None, "start() the container first"
        self.start_code = code
        self.bash(f"export {START_MARK}\n{code}\nexport -n HX_START; unset HX_START")

    # --- the agent's session ----------------------------------------------------------
    def _open_session(self) -> _Session:
        assert self.id is not None
        session = _Session(self.id, self.cwd)
        nonce = secrets.token_hex(8)
        session.send(f"printf '__HX_%s__ %s\\n' '{nonce}' \"$$\"\n")
        raw = self._wait_marker(session, nonce, time.monotonic() + SESSION_START_S)
        if raw is None:
            session.close()
            if session.eof and self.cwd != "/":  # its directory is gone: start in /
                self.cwd = "/"
                return self._open_session()
            raise ContainerError("the task container's shell did not start")
        session.pid = int(raw[1])
        return session

    @staticmethod
    def _wait_marker(
        session: _Session, nonce: str, deadline: float, poll: float | None = None
    ) -> tuple[bytes, str, str] | None:
        """Wait for the marker line; (output before it, exit status, cwd) or None at the
        deadline, on end of stream, or when ``poll`` seconds pass (then ``None`` too)."""
        pattern = re.compile(rb"\n?__HX_" + nonce.encode() + rb"__ (\S+)(?: ([^\n]*))?\n")
        wake = time.monotonic() + poll if poll else deadline
        with session.cond:
            while True:
                match = pattern.search(session.buffer)
                if match:
                    out = bytes(session.buffer[: match.start()])
                    status = match.group(1).decode("utf-8", "replace")
                    rest = (match.group(2) or b"").decode("utf-8", "replace")
                    del session.buffer[: match.end()]  # after reading the groups (a view)
                    return out, status, rest
                now = time.monotonic()
                if session.eof or now >= min(deadline, wake):
                    return None
                session.cond.wait(min(deadline, wake) - now)

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
        """Stop every process the agent's commands started (``KILL_ALL``); False when no
        process could start in the container to do it."""
        assert self.id is not None
        try:
            done = subprocess.run(
                [
                    "docker",
                    "exec",
                    self.id,
                    *trusted.check_command("bash", KILL_ALL, ()),
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
        # checked first (``bash -n``); the nonce is not written next to the marker, so an
        # echo of this line (a shell error) cannot be taken for the marker
        script = (
            f"__hx_c=\"$(printf %s '{encoded}' | base64 -d)\"; "
            'if __hx_e="$(bash -n -c "$__hx_c" 2>&1)"; then '
            '{ eval "$__hx_c"; } </dev/null 2>&1; '
            "else printf '%s\\n' \"$__hx_e\"; (exit 2); fi; "
            f"__hx_rc=$?; printf '\\n__HX_%s__ %s %s\\n' '{nonce}' \"$__hx_rc\" \"$PWD\"\n"
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
        self, session: _Session, script: str, nonce: str, started: float, deadline: float
    ) -> CommandResult:
        assert self.id is not None
        sent = session.send(script)
        limit: str | None = None
        found = None
        while sent:
            poll = self.limits.layer_poll_s if self._upper else self.limits.disk_poll_s
            found = self._wait_marker(session, nonce, deadline, poll=poll)
            if found is not None or session.eof:
                break
            if time.monotonic() >= deadline:
                limit = "timeout"
                break
            if self._over(*self.layer_usage()):
                limit = "disk"
                break
        seconds = time.monotonic() - started
        if found is not None:
            out, status, cwd = found
            _, dropped = session.take()
            if cwd.startswith("/"):
                self.cwd = cwd
            code = int(status) if status.lstrip("-").isdigit() else None
            return CommandResult(clean_text(out), code, seconds, dropped_bytes=dropped)
        # stopped at a limit, or the command ended the shell: a fresh session, same directory
        stopped = self._stop_commands() if limit is not None else True
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
            limit = "pids"
        return CommandResult(
            clean_text(raw), None, seconds, limit=limit, session_ended=limit is None,
            dropped_bytes=dropped,
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
