"""Sandbox entry point: apply limits, load the harness, run one episode, write result.json.

The host starts ``python3 -I -c 'import sys; sys.path.insert(0, DIR); from
harnessctl_runtime.boot import main; main()'`` with the HXRT_* environment (see
harnessctl/constants.py). Limits are applied here, before any harness code is imported,
and harness code cannot raise them again.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from . import wire
from .client import GatewayClient
from .env import EnvClient, EnvError
from .harness import Harness, State
from .loop import EventLog, episode_result, run_episode
from .tools import env_spec

EXIT_OK = 0
EXIT_BAD_SETUP = 3


def apply_limits(limits: dict) -> None:
    import resource

    def cap(kind: int, value: int) -> None:
        soft, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, value))

    mb = 1024 * 1024
    if limits.get("memory_mb"):
        cap(resource.RLIMIT_AS, int(limits["memory_mb"]) * mb)
    if limits.get("cpu_s"):
        cap(resource.RLIMIT_CPU, int(limits["cpu_s"]))
    if limits.get("nproc"):
        cap(resource.RLIMIT_NPROC, int(limits["nproc"]))
    if limits.get("fsize_mb"):
        cap(resource.RLIMIT_FSIZE, int(limits["fsize_mb"]) * mb)
    if limits.get("nofile"):
        cap(resource.RLIMIT_NOFILE, int(limits["nofile"]))


def load_harness(harness_dir: Path, task_dir: Path, manifest: dict) -> Harness:
    """Import ``entry`` (``file.py:Class``) from the harness directory."""
    entry = manifest.get("entry", "harness.py:Harness")
    filename, _, class_name = entry.partition(":")
    path = harness_dir / filename
    sys.path.insert(0, str(harness_dir))
    spec = importlib.util.spec_from_file_location("harness_entry", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load harness entry {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["harness_entry"] = module
    spec.loader.exec_module(module)
    cls = getattr(module, class_name or "Harness")
    if not (isinstance(cls, type) and issubclass(cls, Harness)):
        raise TypeError(f"{entry} is not a harnessctl_runtime.Harness subclass")
    return cls(harness_dir, task_dir, manifest.get("settings") or {})


def start_episode(task: dict, log: EventLog) -> None:
    """Reset a host-served environment's episode before any harness code runs; its first
    observation and public info join the task (``task["observation"]``, ``task["info"]``)."""
    if env_spec().get("surface") != "host":
        return
    first = EnvClient.from_env().reset()
    task["observation"], task["info"] = first.observation, first.info
    log.write("reset", observation=first.observation)


def main() -> None:
    # Harness code imports the runtime as ``harnessctl_runtime``; alias it when the host
    # package layout is used (tests run the runtime straight from the source tree).
    sys.modules.setdefault("harnessctl_runtime", sys.modules[__package__])
    env = os.environ
    # the environment's own in-sandbox code (read-only copies staged by the backend)
    for path in reversed([p for p in env.get(wire.ENV_ENV_PATH, "").split(os.pathsep) if p]):
        sys.path.insert(1, path)
    task_dir = Path(env.get(wire.ENV_TASK_DIR, "/task"))
    harness_dir = Path(env.get(wire.ENV_HARNESS_DIR, "/harness"))
    apply_limits(json.loads(env.get(wire.ENV_LIMITS) or "{}"))
    manifest = json.loads(env.get(wire.ENV_MANIFEST) or "{}")
    log = EventLog(task_dir / "events.jsonl")
    task = json.loads((task_dir / "task.json").read_text(encoding="utf-8"))
    state = State(task=task, max_rounds=15)
    error: BaseException | None = None
    try:
        start_episode(task, log)
    except EnvError as exc:  # the host-served environment did not start: an infra error
        state.status = "infra_error"
        log.write("env_error", error=str(exc))
    try:
        if state.status is None:
            harness = load_harness(harness_dir, task_dir, manifest)
            state.max_rounds = harness.max_rounds
            log.write("start", harness=manifest.get("name"), task_id=task.get("task_id"))
            run_episode(harness, state, GatewayClient.from_env(), log)
    except Exception as exc:  # harness code raised: classified harness_error by the host
        error = exc
    result = episode_result(state, error)
    log.write("end", **{k: v for k, v in result.items() if k != "traceback"})
    log.close()
    tmp = task_dir / "result.json.tmp"
    tmp.write_text(json.dumps(result), encoding="utf-8")
    os.replace(tmp, task_dir / "result.json")
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
