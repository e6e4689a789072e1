"""Sandbox backends: where untrusted harness code runs one rollout.

A backend gets a prepared task directory (public task material only), the harness tree and
the gateway address, runs the runtime, and enforces the wall-clock limit from the host.
Backends are chosen by short name (``local``, ``docker``) or a dotted path
``package.module:Class``; third parties register under the entry-point group
``harnessctl.sandboxes``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..errors import ConfigError
from ..harness import HarnessSpec

BUILTIN = {
    "local": "harnessctl.sandbox.local:LocalSandbox",
    "docker": "harnessctl.sandbox.docker:DockerSandbox",
}


@dataclass(frozen=True)
class Limits:
    """Resource limits for one rollout."""

    timeout_s: float = 60.0
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
    """One rollout to run: ``env`` holds the HXRT_* variables for the runtime."""

    rollout_id: str
    harness: HarnessSpec
    workdir: Path
    env: dict[str, str]
    limits: Limits


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


def get_sandbox(name: str, **options) -> Sandbox:
    """Instantiate a backend by short name, dotted path or entry point."""
    target = BUILTIN.get(name)
    if target is None and ":" in name:
        target = name
    if target is None:
        from importlib.metadata import entry_points

        for ep in entry_points(group="harnessctl.sandboxes"):
            if ep.name == name:
                return ep.load()(**options)
        known = ", ".join(sorted(BUILTIN))
        raise ConfigError("--sandbox", f"unknown sandbox backend {name!r} (known: {known})")
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    return cls(**options)
