"""The ``local`` backend: a subprocess per rollout, as isolated as this host allows.

What it gives: a scrubbed environment (an allowlist, so no API keys or HARNESSCTL_*
settings), the runtime's rlimits (memory, CPU time, processes, file size, open files),
its own session and, where ``unshare`` works, its own network namespace (no network; the
gateway is a unix socket, so model calls still work) and PID namespace (the wall-clock kill
takes every process the harness started), running as ``nobody`` when harnessctl runs as
root. The harness tree and the runtime are private read-only copies, so the code that runs
is the code that was hashed.

What it cannot give: a private filesystem. The harness can read whatever the sandbox user
may read on the host (run as root, that user is ``nobody``; otherwise it is you). Use the
``docker`` backend for untrusted harnesses. Each result records its isolation level.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from . import Job, SandboxResult, stage_packages

SANDBOX_UID = 65534  # nobody
BOOT = "import sys; sys.path.insert(0, {path!r}); from harnessctl_runtime.boot import main; main()"


def _find_python() -> str:
    """An interpreter the sandbox user can execute (a venv under /root is not one)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("python3") or "python3"


def _probe(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class LocalSandbox:
    name = "local"

    def __init__(self, python: str | None = None, isolate: bool = True) -> None:
        self.python = python or _find_python()
        self.isolate = isolate
        self.root: Path | None = None
        self.prefix: list[str] = []
        self.isolation: dict = {}
        self._harness_copies: dict[str, Path] = {}
        self._copy_lock = threading.Lock()

    # --- lifecycle ---------------------------------------------------------------------
    def start(self, gateway_dir: Path | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="hxsb-"))
        os.chmod(self.root, 0o711)
        runtime_src = Path(__file__).resolve().parent.parent / "runtime"
        runtime_dst = self.root / "rt" / "harnessctl_runtime"
        shutil.copytree(runtime_src, runtime_dst, ignore=shutil.ignore_patterns("__pycache__"))
        _read_only(self.root / "rt")
        self.prefix, self.isolation = self._choose_isolation()

    def close(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def _choose_isolation(self) -> tuple[list[str], dict]:
        as_root = os.geteuid() == 0
        level = {
            "backend": "local",
            "filesystem": "host (read access of the sandbox user)",
            "rlimits": True,
            "user": "nobody" if as_root else "invoking user",
            "network": "host",
            "pid_namespace": False,
        }
        if not self.isolate or shutil.which("unshare") is None:
            return [], level
        ns = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
        if as_root:
            ns += ["--setuid", str(SANDBOX_UID), "--setgid", str(SANDBOX_UID)]
        else:
            ns.insert(1, "--map-root-user")
        if _probe([*ns, "--", self.python, "-I", "-S", "-c", "pass"]):
            level.update(network="none", pid_namespace=True)
            return [*ns, "--"], level
        return [], level

    # --- one rollout -------------------------------------------------------------------
    def _harness_copy(self, job: Job) -> Path:
        assert self.root is not None, "start() the sandbox first"
        with self._copy_lock:  # workers may start the same harness at once
            cached = self._harness_copies.get(job.harness.hash)
            if cached is None:
                cached = self.root / "harnesses" / job.harness.hash[:16]
                if not cached.exists():
                    shutil.copytree(
                        job.harness.path,
                        cached,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                    )
                    _read_only(cached)
                self._harness_copies[job.harness.hash] = cached
        return cached

    def run(self, job: Job) -> SandboxResult:
        assert self.root is not None, "start() the sandbox first"
        harness_dir = self._harness_copy(job)
        env_path = stage_packages(self.root, job.packages, self._copy_lock)
        if os.geteuid() == 0 and self.isolation.get("user") == "nobody":
            _chown_tree(job.workdir, SANDBOX_UID)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(job.workdir),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            **job.env,
            "HXRT_HARNESS_DIR": str(harness_dir),
            "HXRT_ENV_PATH": os.pathsep.join(str(self.root / rel) for rel in env_path),
            "HXRT_TASK_DIR": str(job.workdir),
        }
        cmd = [*self.prefix, self.python, "-I", "-S", "-c", BOOT.format(path=str(self.root / "rt"))]
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
            )
        except OSError as exc:
            return SandboxResult(
                None,
                False,
                0.0,
                infra_error=f"cannot start sandbox: {exc}",
                isolation=self.isolation,
            )
        timed_out = False
        try:
            out, err = proc.communicate(timeout=job.limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            out, err = proc.communicate()
        _kill_group(proc)  # leftovers that escaped the wait (background children)
        return SandboxResult(
            exit_code=proc.returncode,
            timed_out=timed_out,
            wall_s=time.monotonic() - started,
            stdout_tail=out[-4000:].decode("utf-8", "replace"),
            stderr_tail=err[-4000:].decode("utf-8", "replace"),
            isolation=self.isolation,
        )


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
