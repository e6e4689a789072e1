"""The node side of a distributed evaluation: run one rollout where the task landed.

Imports no Ray, so any task scheduler can call :func:`run_rollout`. A node keeps one warm
:class:`~harnessctl.run.session.RolloutSession` (gateway + sandbox) per distinct configuration
for the life of its worker process, and writes each harness tree it is sent once into the
node's cache (``$TMPDIR/harnessctl-node-UID/<hash>``), checked against the driver's content
hash before anything runs.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ..envs import Task, get_environment
from ..errors import ConfigError, HarnessctlError, InfraError
from ..harness import HarnessSpec, load_harness, rollout_version
from ..policy import Policy
from ..trees import read_tree
from .session import RolloutRecord, RolloutSession


@dataclass(frozen=True)
class HarnessBundle:
    """A harness tree in transit: its files, executable bits and the driver's content hash."""

    name: str
    hash: str
    files: tuple[tuple[str, bool, bytes], ...]

    @classmethod
    def of(cls, spec: HarnessSpec) -> HarnessBundle:
        files = tuple((f.rel, f.executable, f.data) for f in read_tree(spec.path))
        return cls(name=spec.name, hash=spec.hash, files=files)


@dataclass(frozen=True)
class NodeJob:
    """One rollout, with everything a node needs besides the harness bundle."""

    env_kind: str
    env_options: dict  # the suite's env_options: the node builds the same environment
    session_options: dict
    task: Task  # gold labels included: scored on the node, never shown to the sandbox
    seed: int
    policy: Policy
    runtime: str  # the driver's runtime version, part of the cache key


_lock = threading.Lock()
_sessions: dict[str, RolloutSession] = {}
_harnesses: dict[str, HarnessSpec] = {}


def run_rollout(job: NodeJob, bundle: HarnessBundle) -> RolloutRecord:
    """Run ``job`` on this node; a version or content mismatch is a ``ConfigError``."""
    here = rollout_version(get_environment(job.env_kind, **job.env_options), job.policy.model)
    if here != job.runtime:
        raise ConfigError(
            f"node {os.uname().nodename}",
            f"runs harnessctl runtime {here}, the driver {job.runtime}: install the same "
            "harnessctl version on every node of the cluster",
        )
    harness = _materialise(bundle)
    session = _session(job.env_kind, job.env_options, job.session_options)
    return session.run(harness, job.task, job.seed, job.policy)


def _session(env_kind: str, env_options: dict, options: dict) -> RolloutSession:
    key = "|".join(
        (
            env_kind,
            json.dumps(env_options, sort_keys=True, default=str),
            repr(sorted(options.items())),
        )
    )
    with _lock:
        session = _sessions.get(key)
        if session is None:
            env = get_environment(env_kind, **env_options)
            session = RolloutSession(env, **options).start()
            _sessions[key] = session
        return session


def _materialise(bundle: HarnessBundle) -> HarnessSpec:
    """The bundle's tree in this node's harness cache, written once per node and hash."""
    with _lock:
        cached = _harnesses.get(bundle.hash)
        if cached is not None:
            return cached
        final = _cache_root() / bundle.hash
        spec = _verified(final / bundle.name, bundle)
        if spec is None:
            staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=final.parent))
            _write_tree(staging / bundle.name, bundle)
            os.chmod(staging, 0o755)  # sandboxes run as another user: read, not write
            with contextlib.suppress(OSError):  # taken: another worker process was first
                os.rename(staging, final)
            spec = _verified(final / bundle.name, bundle)
            if spec is None:  # a damaged copy is in the way: keep this process's own
                spec = _verified(staging / bundle.name, bundle)
            else:
                shutil.rmtree(staging, ignore_errors=True)
            if spec is None:
                raise InfraError(f"harness {bundle.name}: cannot materialise it under {final}")
        _harnesses[bundle.hash] = spec
        return spec


def _cache_root() -> Path:
    """``$TMPDIR/harnessctl-node-UID``: shared by this user's worker processes on the node."""
    root = Path(tempfile.gettempdir()) / f"harnessctl-node-{os.getuid()}"
    root.mkdir(mode=0o711, exist_ok=True)
    info = root.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise InfraError(f"{root}: not a private directory of this user; remove it")
    return root


def _write_tree(tree: Path, bundle: HarnessBundle) -> None:
    for rel, executable, data in bundle.files:
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise InfraError(f"harness bundle {bundle.name}: bad path {rel!r}")
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        path.write_bytes(data)
        path.chmod(0o755 if executable else 0o644)


def _verified(tree: Path, bundle: HarnessBundle) -> HarnessSpec | None:
    """The harness at ``tree`` if it is there and hashes to the driver's hash, else None."""
    if not tree.is_dir():
        return None
    try:
        spec = load_harness(tree)
    except HarnessctlError:
        return None
    return spec if spec.hash == bundle.hash else None


@atexit.register
def close_all() -> None:
    """Close this process's sessions (the node's harness cache stays for the next run)."""
    with _lock:
        for session in _sessions.values():
            session.close()
        _sessions.clear()
        _harnesses.clear()
