"""Sandbox backends: where untrusted harness code runs one rollout.

A backend gets a prepared task directory (public task material only), the harness tree and
the gateway address, runs the runtime, and enforces the wall-clock limit from the host.
Backends are chosen by short name (``local``, ``docker``) or a dotted path
``package.module:Class``; third parties register under the entry-point group
``harnessctl.sandboxes``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..harness import HarnessSpec
from ..liveness import process_started
from ..registry import Registry
from ..trees import copy_tree

BUILTIN = {
    "local": "harnessctl.sandbox.local:LocalSandbox",
    "docker": "harnessctl.sandbox.docker:DockerSandbox",
}


@dataclass(frozen=True)
class Limits:
    """Resource limits for one rollout.

    ``timeout_s`` is the harness's own wall-clock time: the seconds the rollout spends
    waiting on the host (model calls, environment resets and steps; concurrent requests
    count once) are added to its deadline, up to ``max_wait_s`` in all. Model calls are
    bounded instead by the gateway's per-call timeout and the rollout's call and token
    budgets (docs/decisions.md).
    """

    timeout_s: float = 60.0
    max_wait_s: float = 1800.0
    memory_mb: int = 1024
    cpu_s: int = 60
    nproc: int = 64
    fsize_mb: int = 64
    nofile: int = 256

    def rlimits(self) -> dict:
        return {
            "memory_mb": self.memory_mb,
            "cpu_s": self.cpu_s,
            "nproc": self.nproc,
            "fsize_mb": self.fsize_mb,
            "nofile": self.nofile,
        }


@dataclass
class Job:
    """One rollout to run: ``env`` holds the HXRT_* variables for the runtime; ``packages``
    the environment's in-sandbox code (:class:`harnessctl.envs.SandboxCode`), which the
    backend makes importable, read only, and names in ``HXRT_ENV_PATH``."""

    rollout_id: str
    harness: HarnessSpec
    workdir: Path
    env: dict[str, str]
    limits: Limits
    packages: tuple = ()
    #: Seconds the rollout has waited on the host so far (the gateway's clock); None: none.
    waited: Callable[[], float] | None = None

    def deadline(self, started: float) -> float:
        """The monotonic time the rollout must end by, as of now: ``started`` plus the
        harness's own ``timeout_s`` plus what it has waited on the host (capped)."""
        waited = min(self.waited(), self.limits.max_wait_s) if self.waited else 0.0
        return started + self.limits.timeout_s + waited


def stage_packages(root: Path, packages: tuple, lock: threading.Lock) -> list[str]:
    """Copy each package once per version under ``root/envs`` (read only); the directories to
    put on the sandbox's ``sys.path``, relative to ``root``."""
    dirs = []
    for code in packages:
        rel = f"envs/{code.package}-{code.version}"
        with lock:
            target = root / rel
            if not target.exists():
                tmp = root / "envs" / f".{code.package}-{code.version}.tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                copy_tree(code.path, tmp / code.package)  # what its version hashed
                precompile(tmp)
                for dirpath, _dirnames, filenames in os.walk(tmp):
                    for name in filenames:
                        os.chmod(Path(dirpath) / name, 0o444)
                    os.chmod(dirpath, 0o555)
                tmp.rename(target)
        dirs.append(rel)
    return dirs


def precompile(root: Path) -> None:
    """Byte-compile the trusted Python sources under ``root`` (the runtime's and an
    environment's private copies) before they are made read only, so a rollout's interpreter
    loads them instead of compiling them again in every sandbox (about a third of a
    simulated rollout's start-up on two busy cores). Never used on a harness tree: compiling
    untrusted code on the host is left to the sandbox. An interpreter of another version
    ignores these files (their magic number differs) and compiles as before."""
    import compileall

    compileall.compile_dir(str(root), quiet=2, workers=1)


OWNER_FILE = ".hx-owner"
RUN_DIR_PREFIXES = ("hxsb-", "hxrun-", "hxgw-", "hxevolve-")


def mark_owner(directory: Path) -> None:
    """Name this process as the owner of a run directory, for :func:`reap_stale`."""
    pid = os.getpid()
    (Path(directory) / OWNER_FILE).write_text(f"{pid} {process_started(pid) or '-'}\n")


def reap_stale(
    parent: Path | None = None, prefixes: tuple[str, ...] = RUN_DIR_PREFIXES
) -> list[Path]:
    """Remove run directories (``hxsb-*``, ``hxrun-*``, ``hxgw-*``, evolve's staging
    ``hxevolve-*`` under /tmp) whose owning
    process is gone (a run killed with SIGKILL): its sandboxes' copies, work directories and
    gateway socket. Directories of live runs, of other users and unmarked ones are left."""
    parent = Path(parent or tempfile.gettempdir())
    removed: list[Path] = []
    entries: list[os.DirEntry] = []
    with contextlib.suppress(OSError):
        entries = list(os.scandir(parent))
    for entry in entries:
        if not entry.name.startswith(prefixes):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
            owner = Path(entry.path) / OWNER_FILE
            if owner.is_symlink() or not owner.is_file():
                continue
            pid_text, _, started = owner.read_text()[:64].strip().partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        alive = process_started(pid)
        if alive and (started in ("-", "") or alive == started):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


@dataclass
class SandboxResult:
    exit_code: int | None
    timed_out: bool
    wall_s: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    infra_error: str | None = None
    isolation: dict = field(default_factory=dict)


class Sandbox(Protocol):
    name: str

    def start(self, gateway_dir: Path | None) -> None: ...

    def run(self, job: Job) -> SandboxResult: ...

    def close(self) -> None: ...


SANDBOXES: Registry[Sandbox] = Registry(
    "harnessctl.sandboxes", "sandbox backend", BUILTIN, option="--sandbox"
)


def get_sandbox(name: str, **options) -> Sandbox:
    """Instantiate a backend by short name, entry point or dotted path."""
    return SANDBOXES.create(name, **options)
