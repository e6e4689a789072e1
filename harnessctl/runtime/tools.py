"""The tools a harness gets: whatever the rollout's environment provides.

The host says which environment the rollout runs in through ``HXRT_ENV`` (JSON), set by the
rollout session from the environment plugin; the runtime names no environment itself:

- ``{"surface": "sandbox", "package": "hxenv_x"}``: an in-sandbox environment; its own
  stdlib-only package (copied next to the runtime) provides ``open_tools(task_dir, runtime)``;
- ``{"surface": "host", "tools": ["act", ...]}``: a host-served environment; each tool sends
  its action to the host episode through the gateway (:mod:`.env`).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from .wire import ENV_ENV as ENV_SPEC


def env_spec() -> dict[str, Any]:
    """The environment binding the host set for this rollout (empty when none)."""
    raw = os.environ.get(ENV_SPEC)
    if not raw:
        return {}
    spec = json.loads(raw)
    return spec if isinstance(spec, dict) else {}


def open_tools(task_dir: Path) -> dict[str, Any]:
    """The tools of the rollout's environment for the task in ``task_dir``."""
    spec = env_spec()
    runtime = sys.modules[__package__ or "harnessctl_runtime"]
    if spec.get("surface") == "sandbox" and spec.get("package"):
        module = importlib.import_module(str(spec["package"]))
        return dict(module.open_tools(Path(task_dir), runtime))
    if spec.get("surface") == "host":
        from .env import EnvClient, HostTool

        client = EnvClient.from_env()
        return {
            str(name): HostTool(str(name), client, runtime.Observation)
            for name in spec.get("tools") or []
        }
    return {}
