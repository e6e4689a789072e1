#!/usr/bin/env python3
"""Throughput and per-rollout overhead of `harnessctl eval --sandbox docker`.

Stdlib only. Measures, at 1 and 2 workers, with the offline policy (sim/dbbench):

* eval-docker: `harnessctl eval --sandbox docker` over N fresh rollouts; the fixed start-up
  cost (imports, store, gateway) is measured by re-running the same command, which serves
  everything from the cache, and subtracted;
* eval-local: the same with `--sandbox local` (the rollout's own work without containers);
* exec-warm (b): a bare loop of exec into one warm, equally hardened container per worker
  (the engine API over its socket: create, start detached, poll, as the backend does), each
  exec starting the runtime's interpreter and importing it (no model calls);
* run-cold (a): a bare loop of `docker run --rm` of the same payload;
* local-payload: the same payload as a bare host subprocess.

Container cost per rollout = eval-docker - eval-local, next to (b) - local-payload; their
difference is what harnessctl's docker backend adds over a bare warm exec.

usage: .venv/bin/python benchmarks/docker_sandbox.py [--rollouts 40] [--json out.json]
Needs a running engine and the image (scripts/build-runtime-image.sh).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGE = os.environ.get("HARNESSCTL_DOCKER_IMAGE", "harnessctl-runtime:latest")
PAYLOAD = "import sys; sys.path.insert(0, '/rt'); import harnessctl_runtime.boot, sqlite3"
HARDENING = [
    "--network",
    "none",
    "--user",
    "65534:65534",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--read-only",
    "--tmpfs",
    "/tmp:size=64m",
    "--memory",
    "1024m",
    "--memory-swap",
    "1024m",
    "--pids-limit",
    "72",
    "--cpus",
    "1",
    "--label",
    "harnessctl.bench=1",
]


def harnessctl() -> str:
    return str(Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "harnessctl")


def workspace() -> Path:
    ws = Path(tempfile.mkdtemp(prefix="hxbench-"))
    shutil.copytree(ROOT / "harnesses" / "dbbench-base", ws / "harnesses" / "dbbench-base")
    shutil.copytree(ROOT / "examples" / "dbbench", ws / "examples" / "dbbench")
    (ws / "harnessctl.yaml").write_text("suite: examples/dbbench\n")
    return ws


def timed(cmd: list[str], env: dict | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - started


def bench_eval(sandbox: str, workers: int, n: int) -> dict:
    ws = workspace()
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    tasks = [x for i in range(n) for x in ("--task", f"dev-{i:03d}")]
    cmd = [
        harnessctl(),
        "eval",
        "dbbench-base",
        "--sandbox",
        sandbox,
        "--rollouts",
        "1",
        "--workers",
        str(workers),
        *tasks,
    ]
    try:
        total = timed(cmd, env)
        fixed = timed(cmd, env)  # every rollout served from the cache: start-up cost only
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    busy = max(total - fixed, 1e-9)
    return {
        "total_s": total,
        "startup_s": fixed,
        "rollouts_per_s": n / busy,
        "s_per_rollout": busy / n,
    }


def parallel(workers: int, n: int, one) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(n)))
    return time.perf_counter() - started


def mounts() -> list[str]:
    return ["-v", f"{ROOT / 'harnessctl' / 'runtime'}:/rt/harnessctl_runtime:ro"]


class Engine(http.client.HTTPConnection):
    """The engine's HTTP API over its unix socket (stdlib only, like the SDK does it)."""

    def __init__(self, path: str = "/var/run/docker.sock") -> None:
        super().__init__("localhost")
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)

    def call(self, method: str, url: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        self.request(method, url, data, {"Content-Type": "application/json"})
        reply = self.getresponse()
        raw = reply.read()
        if reply.status >= 400:
            raise RuntimeError(f"{method} {url}: {reply.status} {raw[:200]!r}")
        return json.loads(raw) if raw else {}


def bench_exec_warm(workers: int, n: int) -> dict:
    """(b): exec into a warm container via the API (create, start detached, poll)."""
    names = []
    for w in range(workers):
        name = f"hxbench-{os.getpid()}-{w}"
        idle = ["/usr/bin/python3", "-I", "-S", "-c", "import signal; signal.pause()"]
        subprocess.run(
            ["docker", "run", "-d", "--name", name, *HARDENING, *mounts(), IMAGE, *idle],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        names.append(name)
    engines = [Engine() for _ in range(workers)]
    cmd = ["/usr/bin/python3", "-I", "-S", "-c", PAYLOAD]

    def one(i: int) -> None:
        api, name = engines[i % workers], names[i % workers]
        exec_id = api.call("POST", f"/containers/{name}/exec", {"Cmd": cmd})["Id"]
        api.call("POST", f"/exec/{exec_id}/start", {"Detach": True})
        while api.call("GET", f"/exec/{exec_id}/json")["Running"]:
            time.sleep(0.01)

    try:
        # one thread per worker, each with its own container and connection
        wall = parallel(workers, workers, lambda w: [one(i) for i in range(w, n, workers)])
    finally:
        subprocess.run(["docker", "rm", "-f", *names], stdout=subprocess.DEVNULL)
    return {"total_s": wall, "rollouts_per_s": n / wall, "s_per_rollout": wall / n}


def bench_local_payload(workers: int, n: int) -> dict:
    """The same payload as a bare host subprocess: what an exec costs without a container."""
    rt = Path(tempfile.mkdtemp(prefix="hxbench-rt-"))
    shutil.copytree(ROOT / "harnessctl" / "runtime", rt / "harnessctl_runtime")
    payload = PAYLOAD.replace("'/rt'", repr(str(rt)))

    def one(_i: int) -> None:
        subprocess.run(["/usr/bin/python3", "-I", "-S", "-c", payload], check=True)

    try:
        wall = parallel(workers, n, one)
    finally:
        shutil.rmtree(rt, ignore_errors=True)
    return {"total_s": wall, "rollouts_per_s": n / wall, "s_per_rollout": wall / n}


def bench_run_cold(workers: int, n: int) -> dict:
    def one(_i: int) -> None:
        subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                *HARDENING,
                *mounts(),
                IMAGE,
                "/usr/bin/python3",
                "-I",
                "-S",
                "-c",
                PAYLOAD,
            ],
            check=True,
        )

    wall = parallel(workers, n, one)
    return {"total_s": wall, "rollouts_per_s": n / wall, "s_per_rollout": wall / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=40)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    subprocess.run(
        [str(ROOT / "scripts" / "build-runtime-image.sh")], check=True, stdout=subprocess.DEVNULL
    )
    n = args.rollouts
    results: dict = {"rollouts": n, "cpus": os.cpu_count(), "image": IMAGE}
    for workers in (1, 2):
        results[f"workers={workers}"] = {
            "eval-docker": bench_eval("docker", workers, n),
            "eval-local": bench_eval("local", workers, n),
            "exec-warm": bench_exec_warm(workers, n),
            "run-cold": bench_run_cold(workers, n),
            "local-payload": bench_local_payload(workers, n),
        }
    for workers in (1, 2):
        row = results[f"workers={workers}"]
        # what containers add to a rollout in harnessctl, next to what they add to a bare exec
        row["eval_docker_minus_local_ms"] = 1000 * (
            row["eval-docker"]["s_per_rollout"] - row["eval-local"]["s_per_rollout"]
        )
        row["exec_warm_minus_local_payload_ms"] = 1000 * (
            row["exec-warm"]["s_per_rollout"] - row["local-payload"]["s_per_rollout"]
        )
        row["harnessctl_overhead_over_b_ms"] = (
            row["eval_docker_minus_local_ms"] - row["exec_warm_minus_local_payload_ms"]
        )
        for name, m in row.items():
            if isinstance(m, dict):
                print(
                    f"workers={workers} {name:12s} {m['rollouts_per_s']:7.2f} rollouts/s "
                    f"{1000 * m['s_per_rollout']:8.1f} ms/rollout"
                )
        print(
            f"workers={workers} container cost per rollout:"
            f" eval {row['eval_docker_minus_local_ms']:.1f} ms,"
            f" bare exec (b) {row['exec_warm_minus_local_payload_ms']:.1f} ms;"
            f" harnessctl over (b): {row['harnessctl_overhead_over_b_ms']:.1f} ms"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
