"""Shared by the os_interaction tests: the task image must be there (CI builds it)."""

from __future__ import annotations

import shutil
import subprocess

from harnessctl.envs.os_interaction.container import DEFAULT_IMAGE
from tests.helpers.ci import unavailable


def require_os_image() -> None:
    """Skip (fail under CI) unless a Docker engine runs and the task image is built."""
    if shutil.which("docker") is None:
        unavailable("the os_interaction tests", "no docker CLI", module=True)
    probe = subprocess.run(
        ["docker", "image", "inspect", DEFAULT_IMAGE], capture_output=True, check=False
    )
    if probe.returncode != 0:
        unavailable(
            "the os_interaction tests",
            f"no Docker engine or no {DEFAULT_IMAGE} (scripts/build-os-image.sh)",
            module=True,
        )
