"""The ``local`` backend: a subprocess per rollout, contained with bubblewrap.

With ``bwrap`` (Debian's ``bubblewrap``) each rollout runs in fresh namespaces (user, mount,
PID, network, IPC, UTS; cgroup where allowed) whose filesystem holds exactly:

* read only: the Python interpreter, its standard library (no third-party packages) and the
  shared libraries they link; the private copy of the runtime; the environment's staged
  sandbox code; this rollout's private copy of the harness tree;
* read-write: the rollout's task directory;
* the gateway's socket directory of this run (read only; connecting needs no write);
* a private ``/tmp`` and ``/dev/shm`` (size-capped tmpfs, gone with the rollout), a minimal
  ``/dev`` and the namespace's own ``/proc``.

No network (the gateway is a unix socket), no view of the workspace, the store, other runs'
sockets or work directories, or the rest of the host. It runs as ``nobody`` when harnessctl
runs as root (bwrap itself is started as ``nobody``, so the user namespace maps to that uid,
never to root), dies with the host process, and the runtime's rlimits apply inside.

When bwrap cannot run, the backend falls back to the old one (``unshare`` namespaces where
permitted; the host's filesystem as the sandbox user sees it) and says so in every result's
``isolation`` record (``filesystem`` names the reason, ``warning`` is set; the CLI shows it).
On that fallback it refuses editor-written harnesses (a manifest with ``edit_id`` or
``direction``): gold labels may be readable there. ``allow_untrusted=True`` or
``HARNESSCTL_ALLOW_UNISOLATED=1`` lifts the refusal.

The host bounds what it takes from the sandbox: stdout and stderr are read incrementally into
a bounded tail, never buffered whole.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..bounds import TAIL_BYTES  # what the host keeps of each of stdout and stderr
from ..constants import RT_ENV_ENV_PATH, RT_ENV_HARNESS, RT_ENV_TASK
from ..errors import HarnessctlError
from ..trees import copy_tree
from . import Job, SandboxResult, mark_owner, precompile, reap_stale, stage_packages

SANDBOX_UID = 65534  # nobody
BOOT = "import sys; sys.path.insert(0, {path!r}); from harnessctl_runtime.boot import main; main()"
_log = logging.getLogger(__name__)
ALLOW_ENV = "HARNESSCTL_ALLOW_UNISOLATED"
BWRAP_ENV = "HARNESSCTL_BWRAP"
TMPFS_BYTES = 64 * 1024 * 1024  # the private /tmp (and /dev/shm) of one rollout
EXIT_GRACE_S = 0.5  # reading on after the runtime exited (output still in the pipe)


class UnisolatedError(HarnessctlError):
    """An untrusted harness was about to run where the host's files are readable."""


def _find_python() -> str:
    """An interpreter the sandbox user can execute (a venv under /root is not one)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("python3") or "python3"


def _probe(cmd: list[str], **popen) -> tuple[bool, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=20, **popen)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    return proc.returncode == 0, (err[-1] if err else f"exit code {proc.returncode}")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def untrusted(job: Job) -> bool:
    """Editor-written harnesses (their manifest names an edit or a direction)."""
    manifest = job.harness.manifest
    return bool(getattr(manifest, "edit_id", None) or getattr(manifest, "direction", None))


@functools.lru_cache(maxsize=8)  # once per process and interpreter: it runs ldd
def python_files(python: str) -> tuple[str, list[str], list[str]]:
    """(the real interpreter, the directories of its standard library, the shared libraries
    the interpreter and the stdlib's extension modules link, the loader included)."""
    real = os.path.realpath(python)
    code = (
        "import sys, sysconfig; p = sysconfig.get_paths(); "
        "print(sys.platlibdir); print(p['stdlib']); print(p['platstdlib'])"
    )
    out = subprocess.run(
        [real, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=20, check=True
    ).stdout.split("\n")
    stdlib = sorted({os.path.realpath(d) for d in out[1:3] if d and os.path.isdir(d)})
    objects = [real]
    for d in stdlib:
        dynload = Path(d) / "lib-dynload"
        if dynload.is_dir():
            objects += sorted(str(p) for p in dynload.glob("*.so"))
    libs: set[str] = set()
    if shutil.which("ldd"):
        res = subprocess.run(["ldd", *objects], capture_output=True, text=True, timeout=60)
        for line in res.stdout.splitlines():
            line = line.strip()
            target = line.split("=>", 1)[1] if "=>" in line else line
            path = target.strip().split(" (", 1)[0].strip()
            if path.startswith("/") and os.path.exists(path):
                libs.add(path)
    return real, stdlib, sorted(libs)


class LocalSandbox:
    name = "local"

    def __init__(
        self,
        python: str | None = None,
        isolate: bool = True,
        allow_untrusted: bool | None = None,
        bwrap: str | None = None,
    ) -> None:
        self.python = python or _find_python()
        self.isolate = isolate
        self.allow_untrusted = (
            _truthy(os.environ.get(ALLOW_ENV)) if allow_untrusted is None else allow_untrusted
        )
        if bwrap is None:  # HARNESSCTL_BWRAP names another bwrap ("" or a bad path: fallback)
            bwrap = os.environ.get(BWRAP_ENV, shutil.which("bwrap") or "")
        self.bwrap = bwrap
        self.root: Path | None = None
        self.gateway_dir: Path | None = None
        self.prefix: list[str] = []
        self.isolation: dict = {}
        self._binds: list[str] = []  # the read-only system part of a bwrap command
        self._exe = self.python
        self._as_nobody = os.geteuid() == 0
        self._harness_copies: dict[str, Path] = {}
        self._copy_lock = threading.Lock()

    # --- lifecycle ---------------------------------------------------------------------
    def start(self, gateway_dir: Path | None = None) -> None:
        reap_stale()
        self.gateway_dir = Path(gateway_dir).resolve() if gateway_dir else None
        self.root = Path(tempfile.mkdtemp(prefix="hxsb-"))
        mark_owner(self.root)
        os.chmod(self.root, 0o711)
        runtime_src = Path(__file__).resolve().parent.parent / "runtime"
        runtime_dst = self.root / "rt" / "harnessctl_runtime"
        copy_tree(runtime_src, runtime_dst)  # what runtime_version hashed
        precompile(runtime_dst)
        _read_only(self.root / "rt")
        self.prefix, self.isolation = self._choose_isolation()

    def close(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    @property
    def fs_isolated(self) -> bool:
        return self.isolation.get("filesystem") == "private"

    def _choose_isolation(self) -> tuple[list[str], dict]:
        why = "isolation turned off (isolate=False)"
        if self.isolate and self.bwrap:
            ok, why = self._setup_bwrap()
            if ok:
                return [], {
                    "backend": "local",
                    "tool": "bwrap",
                    "filesystem": "private",
                    "rlimits": True,
                    "user": "nobody" if self._as_nobody else "invoking user",
                    "network": "none",
                    "pid_namespace": True,
                    "tmp": "private tmpfs",
                }
            why = f"bubblewrap cannot run here: {why}"
        elif self.isolate:
            why = "bubblewrap (bwrap) is not installed (apt-get install -y bubblewrap)"
        return self._fallback(why)

    def _fallback(self, why: str) -> tuple[list[str], dict]:
        as_root = os.geteuid() == 0
        level = {
            "backend": "local",
            "tool": "none",
            "filesystem": f"host (read access of the sandbox user): {why}",
            "warning": (
                "UNISOLATED local sandbox: harness code can read the host's files "
                f"(gold labels included) because {why}; editor-written harnesses are refused "
                f"unless {ALLOW_ENV}=1"
            ),
            "rlimits": True,
            "user": "nobody" if as_root else "invoking user",
            "network": "host",
            "pid_namespace": False,
        }
        _log.warning(level["warning"])
        self._exe = self.python
        if not self.isolate or shutil.which("unshare") is None:
            return [], level
        ns = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
        if as_root:
            ns += ["--setuid", str(SANDBOX_UID), "--setgid", str(SANDBOX_UID)]
        else:
            ns.insert(1, "--map-root-user")
        if _probe([*ns, "--", self.python, "-I", "-S", "-c", "pass"])[0]:
            level.update(network="none", pid_namespace=True)
            return [*ns, "--"], level
        return [], level

    def _popen_user(self) -> dict:
        if not self._as_nobody:
            return {}
        return {"user": SANDBOX_UID, "group": SANDBOX_UID, "extra_groups": []}

    def _setup_bwrap(self) -> tuple[bool, str]:
        try:
            exe, stdlib, libs = python_files(self.python)
        except (OSError, subprocess.SubprocessError) as exc:
            return False, f"cannot inspect {self.python}: {exc}"
        binds: list[str] = []
        for path in [*libs, exe]:
            binds += ["--ro-bind", path, path]
        for d in stdlib:
            binds += ["--ro-bind", d, d]
            for sub in ("site-packages", "dist-packages", "test"):  # third-party, test suite
                if (Path(d) / sub).is_dir():
                    binds += ["--tmpfs", str(Path(d) / sub)]
        self._binds, self._exe = binds, exe
        assert self.root is not None
        rt = str(self.root / "rt")  # the sandbox user must reach what is bound from our dirs
        check = f"import sys; sys.path.insert(0, {rt!r}); import harnessctl_runtime"
        cmd = [*self._command(["--ro-bind", rt, rt]), exe, "-I", "-S", "-c", check]
        return _probe(cmd, **self._popen_user())

    def _command(self, extra: list[str], chdir: str = "/") -> list[str]:
        """The bwrap command line up to the program: namespaces, system binds, ``extra``."""
        return [
            self.bwrap,
            "--unshare-all",  # user, mount, pid, net, ipc, uts, cgroup (where allowed)
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--perms",
            "1777",
            "--size",
            str(TMPFS_BYTES),
            "--tmpfs",
            "/tmp",
            "--perms",
            "1777",
            "--size",
            str(TMPFS_BYTES),
            "--tmpfs",
            "/dev/shm",
            *self._binds,
            *extra,
            "--chdir",
            chdir,
            "--",
        ]

    # --- one rollout -------------------------------------------------------------------
    def _harness_copy(self, job: Job) -> Path:
        assert self.root is not None, "start() the sandbox first"
        with self._copy_lock:  # workers may start the same harness at once
            cached = self._harness_copies.get(job.harness.hash)
            if cached is None:
                cached = self.root / "harnesses" / job.harness.hash[:16]
                if not cached.exists():  # exactly the files hashed (harnessctl.trees)
                    tmp = cached.with_name(cached.name + ".partial")
                    shutil.rmtree(tmp, ignore_errors=True)
                    copy_tree(job.harness.path, tmp, expect=job.harness.hash)
                    _read_only(tmp)
                    tmp.rename(cached)
                self._harness_copies[job.harness.hash] = cached
        return cached

    def run(self, job: Job) -> SandboxResult:
        assert self.root is not None, "start() the sandbox first"
        if not self.fs_isolated and untrusted(job) and not self.allow_untrusted:
            raise UnisolatedError(
                f"refusing to run the editor-written harness {job.harness.name!r} on the "
                f"local backend without filesystem isolation ({self.isolation['filesystem']}): "
                "install bubblewrap (apt-get install -y bubblewrap), use --sandbox docker, "
                f"or accept the risk with {ALLOW_ENV}=1"
            )
        harness_dir = self._harness_copy(job)
        staged = stage_packages(self.root, job.packages, self._copy_lock)
        env_path = [str(self.root / rel) for rel in staged]
        if os.geteuid() == 0 and self.isolation.get("user") == "nobody":
            _chown_tree(job.workdir, SANDBOX_UID)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(job.workdir),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            **job.env,
            RT_ENV_HARNESS: str(harness_dir),
            RT_ENV_ENV_PATH: os.pathsep.join(env_path),
            RT_ENV_TASK: str(job.workdir),
        }
        program = [self._exe, "-I", "-S", "-c", BOOT.format(path=str(self.root / "rt"))]
        popen: dict = {}
        if self.fs_isolated:
            workdir = str(job.workdir)
            extra = ["--ro-bind", str(self.root / "rt"), str(self.root / "rt")]
            extra += ["--ro-bind", str(harness_dir), str(harness_dir)]
            for d in env_path:
                extra += ["--ro-bind", d, d]
            if self.gateway_dir is not None:
                extra += ["--ro-bind", str(self.gateway_dir), str(self.gateway_dir)]
            extra += ["--bind", workdir, workdir]
            cmd = [*self._command(extra, chdir=workdir), *program]
            popen = self._popen_user()
        else:
            cmd = [*self.prefix, *program]
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=job.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                **popen,
            )
        except OSError as exc:
            return SandboxResult(
                None,
                False,
                0.0,
                infra_error=f"cannot start sandbox: {exc}",
                isolation=self.isolation,
            )
        try:
            out, err, timed_out = _collect(proc, functools.partial(job.deadline, time.monotonic()))
        finally:
            _kill_group(proc)  # the timeout, and leftovers that escaped the wait
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            for pipe in (proc.stdout, proc.stderr):
                with contextlib.suppress(OSError):
                    pipe.close()  # type: ignore[union-attr]
        return SandboxResult(
            exit_code=proc.returncode,
            timed_out=timed_out,
            wall_s=time.monotonic() - started,
            stdout_tail=out.decode("utf-8", "replace"),
            stderr_tail=err.decode("utf-8", "replace"),
            isolation=self.isolation,
        )


def _collect(proc: subprocess.Popen, deadline_of: Callable[[], float]) -> tuple[bytes, bytes, bool]:
    """Read stdout and stderr as they come, keeping the last ``TAIL_BYTES`` of each, until
    both close (or shortly after the runtime exits) or the deadline passes (``deadline_of``:
    it moves on while the rollout waits on the host)."""
    assert proc.stdout is not None and proc.stderr is not None  # started with PIPE
    tails: dict[Any, bytearray] = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    sel = selectors.DefaultSelector()
    for pipe in tails:
        os.set_blocking(pipe.fileno(), False)
        sel.register(pipe, selectors.EVENT_READ)
    deadline = deadline_of()
    exited_at: float | None = None
    timed_out = False
    try:
        while sel.get_map():
            now, deadline = time.monotonic(), deadline_of()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > EXIT_GRACE_S:
                break  # a stray holder of the pipe must not hold the host
            if now >= deadline:
                timed_out = proc.poll() is None
                break
            for key, _ in sel.select(min(deadline - now, 0.2)):
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = tails[key.fileobj]
                buf += chunk
                if len(buf) > 4 * TAIL_BYTES:
                    del buf[:-TAIL_BYTES]
        while not timed_out and exited_at is None and proc.poll() is None:
            if time.monotonic() >= deadline_of():
                timed_out = True
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, min(deadline_of() - time.monotonic(), 0.2)))
    finally:
        sel.close()
    out, err = (bytes(tails[p][-TAIL_BYTES:]) for p in (proc.stdout, proc.stderr))
    return out, err, timed_out


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _read_only(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            os.chmod(Path(dirpath) / name, 0o444)
        os.chmod(dirpath, 0o555)


def _chown_tree(root: Path, uid: int) -> None:
    os.chown(root, uid, uid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(Path(dirpath) / name, uid, uid, follow_symlinks=False)
