#!/usr/bin/env python3
"""Throughput and per-rollout overhead of `harnessctl eval --sandbox docker`.

Measures, at 1 and 2 workers, with the offline policy (sim/dbbench), the same episodes
(tasks dev-000.. of examples/dbbench, seed 0, harness dbbench-base) three ways:

* eval-docker: `harnessctl eval --sandbox docker` (the hardened warm containers of issue
  #14: root-owned init checked between rollouts, seccomp allowlist, scratch wiped at boot,
  host-owned log files), per-rollout cost taken as the slope between a run of N fresh
  rollouts and one of W (the number of workers), so that its fixed costs (start-up, litellm
  import, gateway, one container per worker, close) cancel out;
* eval-fresh: the same with `HARNESSCTL_DOCKER_FRESH=1`, one container per rollout;
* exec-warm (b): a bare loop of exec into one warm container per worker, through the
  engine's HTTP API (create, start detached, poll every 10 ms, as the backend did before
  it waited on the exec's attach stream);
* run-cold (a): a bare loop of `docker run --rm`, one container per episode.

(a) and (b) run exactly what an eval rollout runs in its sandbox: the real runtime (a
read-only copy at /rt, the backend's own boot command) with the real harness (a read-only
copy at /harness) on a task directory prepared by the environment's own `prepare`, calling
a real gateway (harnessctl's `Gateway`, in this process, on a unix socket mounted read-only)
that serves `sim/dbbench` with the task's view registered, as `RolloutSession.run` does.
Containers get the backend's hardening: no network, user 65534, all capabilities dropped,
no-new-privileges, read-only root with a 64 MB tmpfs on /tmp, memory = memory + swap =
1024 MB, 72 pids, 1 CPU. What (b) leaves out is what harnessctl adds: orchestration,
copying task files in and out, the pids check, scoring, classification, store writes and
trajectory files. Hence:

    overhead = eval-docker s/rollout - (b) s/rollout          (target: <= 50 ms)
    throughput ratio = eval-docker rollouts/s / (b) rollouts/s (target: >= 0.90)

Every loop checks that each episode wrote a result and made its model calls; the prompt
tokens of all episodes are printed next to eval's, as evidence that the work is the same.

usage: .venv/bin/python benchmarks/docker_sandbox.py [--rollouts 40] [--json out.json]
       .venv/bin/python benchmarks/docker_sandbox.py --rollouts 12 --worker-counts 2
       .venv/bin/python benchmarks/docker_sandbox.py --interleaved 5 --workers 2 --rollouts 12
(the last measures the backend itself, hardened warm vs fresh vs (b), in interleaved rounds:
the figure to trust on a machine other jobs load, where eval slopes are noise).
       .venv/bin/python benchmarks/docker_sandbox.py --loop exec-warm --workers 2 --rollouts 20
(the second runs one bare loop alone, for whole-process timing with /usr/bin/time -v).
Needs a running engine and the image (scripts/build-runtime-image.sh); imports harnessctl.
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
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harnessctl.constants import (
    DEFAULT_MAX_CALLS,
    DEFAULT_MAX_TOKENS,
    RT_ENV_ENV,
    RT_ENV_GATEWAY,
    RT_ENV_HARNESS,
    RT_ENV_LIMITS,
    RT_ENV_MANIFEST,
    RT_ENV_TASK,
    RT_ENV_TOKEN,
)
from harnessctl.gateway import Budget, Gateway
from harnessctl.gateway.llm import get_litellm
from harnessctl.harness import load_harness
from harnessctl.policies import get_offline_policy, oracle
from harnessctl.policy import Policy
from harnessctl.sandbox import Job, Limits
from harnessctl.sandbox.docker import BOOT, LOG_DIR, SANDBOX_USER, DockerSandbox
from harnessctl.sandbox.docker_files import read_only_tree
from harnessctl.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent
POLICY = "sim/dbbench"  # the offline test double of DBBench, eval's default on this suite
IMAGE = os.environ.get("HARNESSCTL_DOCKER_IMAGE", "harnessctl-runtime:latest")
PYTHON = "/usr/bin/python3"
LIMITS = Limits()  # what `harnessctl eval` uses (--timeout 60)
OVERHEAD_TARGET_MS = 50.0
THROUGHPUT_TARGET = 0.90
# the docker backend's container settings (harnessctl/sandbox/docker.py, DockerSandbox._create)
HARDENING = [
    "--network=none",
    f"--user={SANDBOX_USER}",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    "--read-only",
    "--tmpfs=/tmp:rw,nosuid,nodev,size=64m",
    f"--memory={LIMITS.memory_mb}m",
    f"--memory-swap={LIMITS.memory_mb}m",
    f"--pids-limit={LIMITS.nproc + 8}",
    "--cpus=1",
    "--workdir=/task",
    "--env=LANG=C.UTF-8",
    "--label=harnessctl.bench=1",
]


def harnessctl() -> str:
    return str(Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "harnessctl")


def task_ids(n: int) -> list[str]:
    return [f"dev-{i:03d}" for i in range(n)]


# --- (0) harnessctl eval ----------------------------------------------------------------
def eval_once(
    workers: int, n: int, repeat: bool = False, fresh: bool = False
) -> tuple[float, dict, float | None]:
    """Wall seconds and --json output of one eval of n fresh rollouts (and of its re-run);
    ``fresh``: one container per rollout (HARNESSCTL_DOCKER_FRESH=1)."""
    ws = Path(tempfile.mkdtemp(prefix="hxbench-"))
    shutil.copytree(ROOT / "harnesses" / "dbbench-base", ws / "harnesses" / "dbbench-base")
    shutil.copytree(ROOT / "examples" / "dbbench", ws / "examples" / "dbbench")
    (ws / "harnessctl.yaml").write_text("suite: examples/dbbench\n")
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    env["HARNESSCTL_DOCKER_FRESH"] = "1" if fresh else "0"
    tasks = [x for t in task_ids(n) for x in ("--task", t)]
    cmd = [harnessctl(), "eval", "dbbench-base", "--sandbox", "docker", "--json"]
    cmd += ["--rollouts", "1", "--workers", str(workers), "--policy", POLICY, *tasks]

    def timed() -> tuple[float, dict]:
        started = time.perf_counter()
        out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True).stdout
        return time.perf_counter() - started, json.loads(out)

    try:
        wall, first = timed()
        cached = timed() if repeat else None
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    if first["executed"] != n or (cached and cached[1]["cached"] != n):
        raise RuntimeError(
            f"eval of {n} rollouts ran {first['executed']}"
            + (f", its re-run found {cached[1]['cached']} cached" if cached else "")
            + f": {first['summary']['outcomes']}, infra_failed {first.get('infra_failed')}"
        )
    return wall, first, cached[0] if cached else None


def bench_eval(workers: int, n: int, fresh: bool = False) -> dict:
    """Per-rollout cost as the slope between an eval of n rollouts and one of `workers`.

    Both pay the same fixed costs: process start-up, store, and the session's start and
    close (litellm import ~4 s, gateway, image check, reaper, one container per worker). A
    fully cached re-run pays only the first of these, so subtracting it, the method of
    earlier versions, leaves the session's start-up in the per-rollout figure; it is still
    reported (`s_per_rollout_cache_method`).
    """
    total, out, cached = eval_once(workers, n, repeat=True, fresh=fresh)
    small, _, _ = eval_once(workers, workers, fresh=fresh)
    busy = max(total - small, 1e-9)
    assert cached is not None
    return {
        "total_s": total,
        "startup_s": small - workers * busy / (n - workers),
        "cached_rerun_s": cached,
        "rollouts_per_s": (n - workers) / busy,
        "s_per_rollout": busy / (n - workers),
        "s_per_rollout_cache_method": (total - cached) / n,
        "prompt_tokens": out["summary"]["prompt_tokens"],
        "successes": out["summary"]["successes"],
    }


# --- what every bare episode shares: gateway, oracle, task files --------------------------
class Episodes:
    """The eval rollout's episode without harnessctl around it (see RolloutSession.run)."""

    def __init__(self, n: int) -> None:
        suite = load_suite(ROOT / "examples" / "dbbench")
        self.env = suite.environment
        by_id = {t.id: t for t in suite.tasks("dev").tasks}
        self.tasks = [by_id[t] for t in task_ids(n)]
        self.harness = load_harness(ROOT / "harnesses" / "dbbench-base")
        self.policy = Policy(POLICY)
        self.budget = Budget(max_calls=DEFAULT_MAX_CALLS, max_tokens=DEFAULT_MAX_TOKENS)
        self.gateway = Gateway()
        self.root = Path(tempfile.mkdtemp(prefix="hxbench-"))
        os.chmod(self.root, 0o711)
        self.prompt_tokens = 0
        self._lock = threading.Lock()

    def __enter__(self) -> Episodes:
        get_litellm()  # registers the sim provider; eval pays this before its rollouts too
        self.gateway.start()
        rt = self.root / "rt"
        shutil.copytree(
            ROOT / "harnessctl" / "runtime",
            rt / "harnessctl_runtime",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        code = self.env.sandbox_code  # DBBench's own SQL layer, next to the runtime
        shutil.copytree(code.path, rt / code.package, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(
            self.harness.path,
            self.root / "harness",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        read_only_tree(rt)
        read_only_tree(self.root / "harness")
        return self

    def __exit__(self, *exc: object) -> None:
        self.gateway.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def home(self) -> Path:
        """A container's host-side /task and log directories, writable by the sandbox user."""
        home = Path(tempfile.mkdtemp(prefix="c-", dir=self.root))
        os.chmod(home, 0o711)
        for sub in ("task", "log"):
            (home / sub).mkdir()
            give_to_sandbox(home / sub)
        for name in ("stdout", "stderr"):  # the backend's boot writes only files the host made
            (home / "log" / name).touch()
            give_to_sandbox(home / "log" / name)
        return home

    def mounts(self, home: Path) -> list[str]:
        gw = self.gateway.socket_path.parent  # type: ignore[union-attr]
        return [
            f"--volume={self.root / 'rt'}:/rt:ro",
            f"--volume={self.root / 'harness'}:/harness:ro",
            f"--volume={home / 'task'}:/task:rw",
            f"--volume={home / 'log'}:{LOG_DIR}:rw",
            f"--volume={gw}:{gw}:ro",
        ]

    def open(self, i: int, task_dir: Path) -> tuple[str, str, dict[str, str]]:
        """Prepare the task files in ``task_dir`` and open the rollout at the gateway."""
        task, rollout_id = self.tasks[i], uuid.uuid4().hex
        for entry in os.scandir(task_dir):
            os.unlink(entry.path)
        self.env.prepare(task, task_dir)
        give_to_sandbox(task_dir, *task_dir.iterdir())
        # the offline policy's own channel, as RolloutSession.run opens it
        oracle.register(rollout_id, get_offline_policy(self.policy.model).view(self.env, task))
        token = self.gateway.open_rollout(
            rollout_id,
            model=self.policy.model,
            params=dict(self.policy.params),
            budget=self.budget,
            metadata={"task_id": task.id, "seed": 0},
        )
        env = {  # the backend's exec environment
            "PATH": "/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            RT_ENV_GATEWAY: self.gateway.address,
            RT_ENV_TOKEN: token,
            RT_ENV_MANIFEST: self.harness.manifest.model_dump_json(),
            RT_ENV_LIMITS: json.dumps(LIMITS.rlimits()),
            RT_ENV_HARNESS: "/harness",
            RT_ENV_TASK: "/task",
            RT_ENV_ENV: json.dumps(self.env.runtime_binding()),
        }
        return rollout_id, token, env

    def close(self, rollout_id: str, token: str, task_dir: Path) -> None:
        ledger = self.gateway.close_rollout(token)
        oracle.unregister(rollout_id)
        result = json.loads((task_dir / "result.json").read_text())
        if result.get("status") in (None, "harness_error", "infra_error") or not ledger.calls:
            raise RuntimeError(f"episode failed: {result.get('status')} {result.get('error')}")
        with self._lock:
            self.prompt_tokens += ledger.prompt_tokens


def give_to_sandbox(*paths: Path) -> None:
    for path in paths:
        if os.geteuid() == 0:
            os.chown(path, 65534, 65534)
        else:
            os.chmod(path, 0o777 if path.is_dir() else 0o666)


def bare_exec(episodes, api, container: str, task_dir: Path, i: int) -> None:
    """Loop (b): one episode as a plain exec into a warm container over the engine's API."""
    rollout_id, token, env = episodes.open(i, task_dir)
    body = {
        "Cmd": [PYTHON, "-I", "-S", "-c", BOOT],
        "Env": [f"{k}={v}" for k, v in env.items()],
        "User": SANDBOX_USER,
        "WorkingDir": "/task",
    }
    exec_id = api.call("POST", f"/containers/{container}/exec", body)["Id"]
    api.call("POST", f"/exec/{exec_id}/start", {"Detach": True})
    while (info := api.call("GET", f"/exec/{exec_id}/json"))["Running"]:
        time.sleep(0.01)
    if info["ExitCode"] != 0:
        raise RuntimeError(f"exec exited {info['ExitCode']}")
    episodes.close(rollout_id, token, task_dir)


def timed_loop(workers: int, n: int, one) -> float:
    """One thread per worker, worker w taking episodes w, w + workers, ..."""
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda w: [one(w, i) for i in range(w, n, workers)], range(workers)))
    return time.perf_counter() - started


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


def result(n: int, wall: float, episodes: Episodes) -> dict:
    return {
        "total_s": wall,
        "rollouts_per_s": n / wall,
        "s_per_rollout": wall / n,
        "prompt_tokens": episodes.prompt_tokens,
    }


# --- (b) exec into a warm container -----------------------------------------------------
def bench_exec_warm(workers: int, n: int) -> dict:
    with Episodes(n) as episodes:
        homes = [episodes.home() for _ in range(workers)]
        names = [f"hxbench-{os.getpid()}-{w}" for w in range(workers)]
        idle = [PYTHON, "-I", "-S", "-c", "import signal; signal.pause()"]
        try:
            for name, home in zip(names, homes, strict=True):
                subprocess.run(
                    ["docker", "run", "-d", "--name", name, *HARDENING]
                    + [*episodes.mounts(home), IMAGE, *idle],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
            engines = [Engine() for _ in range(workers)]

            def one(w: int, i: int) -> None:
                bare_exec(episodes, engines[w], names[w], homes[w] / "task", i)

            wall = timed_loop(workers, n, one)
        finally:
            subprocess.run(["docker", "rm", "-f", *names], capture_output=True)
        return result(n, wall, episodes)


# --- (a) a fresh `docker run --rm` per episode --------------------------------------------
def bench_run_cold(workers: int, n: int) -> dict:
    with Episodes(n) as episodes:

        def one(_w: int, i: int) -> None:
            home = episodes.home()
            rollout_id, token, env = episodes.open(i, home / "task")
            subprocess.run(
                ["docker", "run", "--rm", *HARDENING, *episodes.mounts(home)]
                + [f"--env={k}={v}" for k, v in env.items()]
                + [IMAGE, PYTHON, "-I", "-S", "-c", BOOT],
                check=True,
            )
            episodes.close(rollout_id, token, home / "task")
            shutil.rmtree(home)

        wall = timed_loop(workers, n, one)
        return result(n, wall, episodes)


# --- interleaved: the backend itself, hardened warm vs fresh, against (b) -------------------
def bench_interleaved(workers: int, n: int, rounds: int) -> dict:
    """The sandbox layer alone, on a busy machine: every round runs the same n episodes
    through (b) the bare warm exec loop, the docker backend's hardened warm containers
    (`DockerSandbox().run`) and its fresh container per rollout (`fresh=True`), one after
    the other, so a change in the machine's load hits all three alike. Reports each one's
    per-round ms/rollout and their medians. What the backend adds over (b): the copies of
    the task files in and out, the log and token files, the scratch wipe at boot, the
    process check and, in fresh mode, a container per rollout."""
    with Episodes(n) as episodes:
        gw_dir = episodes.gateway.socket_path.parent  # type: ignore[union-attr]
        homes = [episodes.home() for _ in range(workers)]
        names = [f"hxbench-{os.getpid()}-{w}" for w in range(workers)]
        idle = [PYTHON, "-I", "-S", "-c", "import signal; signal.pause()"]
        backends = {"hardened-warm": DockerSandbox(), "hardened-fresh": DockerSandbox(fresh=True)}
        times: dict[str, list[float]] = {"exec-warm": [], **{k: [] for k in backends}}
        try:
            for name, home in zip(names, homes, strict=True):
                subprocess.run(
                    ["docker", "run", "-d", "--name", name, *HARDENING]
                    + [*episodes.mounts(home), IMAGE, *idle],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
            for backend in backends.values():
                backend.start(gw_dir)
            engines = [Engine() for _ in range(workers)]

            def bare(w: int, i: int) -> None:
                bare_exec(episodes, engines[w], names[w], homes[w] / "task", i)

            def through(backend: DockerSandbox):
                def one(_w: int, i: int) -> None:
                    workdir = Path(tempfile.mkdtemp(prefix="job-", dir=episodes.root))
                    rollout_id, token, env = episodes.open(i, workdir)
                    code = episodes.env.sandbox_code
                    job = Job(rollout_id, episodes.harness, workdir, env, LIMITS, (code,))
                    res = backend.run(job)
                    if res.infra_error or res.exit_code != 0:
                        raise RuntimeError(f"rollout failed: {res.infra_error or res.exit_code}")
                    episodes.close(rollout_id, token, workdir)
                    shutil.rmtree(workdir)

                return one

            loops = {"exec-warm": bare, **{k: through(b) for k, b in backends.items()}}
            for one in loops.values():  # warm-up: first containers, first imports
                timed_loop(workers, workers, one)
            for _ in range(rounds):
                for name, one in loops.items():
                    times[name].append(1000 * timed_loop(workers, n, one) / n)
        finally:
            for backend in backends.values():
                backend.close()
            subprocess.run(["docker", "rm", "-f", *names], capture_output=True)
    medians = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    base = medians["exec-warm"]
    return {
        "ms_per_rollout": times,
        "median_ms_per_rollout": medians,
        "overhead_ms": {k: medians[k] - base for k in backends},
        "throughput_ratio": {k: base / medians[k] for k in backends},
    }


LOOPS = {"exec-warm": bench_exec_warm, "run-cold": bench_run_cold}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=40, help="episodes per measurement")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument(
        "--loop",
        choices=sorted(LOOPS),
        help="run only this bare loop, once, at --workers (for whole-process timing)",
    )
    parser.add_argument("--workers", type=int, default=1, help="workers of --loop")
    parser.add_argument(
        "--worker-counts", default="1,2", help="worker counts to measure (comma-separated)"
    )
    parser.add_argument(
        "--interleaved",
        type=int,
        metavar="ROUNDS",
        help="measure the backend itself (hardened warm, fresh, (b)) in ROUNDS interleaved "
        "rounds of --rollouts episodes at --workers, instead of the eval measurements",
    )
    args = parser.parse_args()
    n = args.rollouts
    if args.interleaved:
        figures = bench_interleaved(args.workers, n, args.interleaved)
        for name, ms in figures["median_ms_per_rollout"].items():
            runs = " ".join(f"{t:.0f}" for t in figures["ms_per_rollout"][name])
            print(f"workers={args.workers} {name:15s} median {ms:7.1f} ms/rollout  ({runs})")
        for name, over in figures["overhead_ms"].items():
            ratio = figures["throughput_ratio"][name]
            print(f"{name}: {over:+.1f} ms/rollout over (b), throughput {100 * ratio:.0f}% of (b)")
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        return
    if n < 3 and not args.loop:
        parser.error("--rollouts must be at least 3 (eval's cost is a slope from 2 workers up)")
    if args.loop:
        m = LOOPS[args.loop](args.workers, n)
        print(f"{args.loop} workers={args.workers}: {1000 * m['s_per_rollout']:.1f} ms/rollout")
        return
    subprocess.run(
        [str(ROOT / "scripts" / "build-runtime-image.sh")], check=True, stdout=subprocess.DEVNULL
    )
    results: dict = {"rollouts": n, "cpus": os.cpu_count(), "image": IMAGE}
    for workers in (int(w) for w in args.worker_counts.split(",")):
        row = {
            "eval-docker": bench_eval(workers, n),
            "eval-fresh": bench_eval(workers, n, fresh=True),
            "exec-warm": bench_exec_warm(workers, n),
            "run-cold": bench_run_cold(workers, n),
        }
        ev, warm, fresh = row["eval-docker"], row["exec-warm"], row["eval-fresh"]
        row["overhead_ms"] = 1000 * (ev["s_per_rollout"] - warm["s_per_rollout"])
        row["throughput_ratio"] = ev["rollouts_per_s"] / warm["rollouts_per_s"]
        row["fresh_overhead_ms"] = 1000 * (fresh["s_per_rollout"] - warm["s_per_rollout"])
        row["fresh_throughput_ratio"] = fresh["rollouts_per_s"] / warm["rollouts_per_s"]
        row["overhead_ok"] = row["overhead_ms"] <= OVERHEAD_TARGET_MS
        row["throughput_ok"] = row["throughput_ratio"] >= THROUGHPUT_TARGET
        results[f"workers={workers}"] = row
        for name in ("eval-docker", "eval-fresh", "exec-warm", "run-cold"):
            m = row[name]
            print(
                f"workers={workers} {name:11s} {m['rollouts_per_s']:6.2f} rollouts/s"
                f" {1000 * m['s_per_rollout']:7.1f} ms/rollout"
                f"  (prompt tokens {m['prompt_tokens']})"
            )
        print(
            f"workers={workers} overhead over (b): {row['overhead_ms']:+.1f} ms/rollout"
            f" (target <= {OVERHEAD_TARGET_MS:.0f}: {'met' if row['overhead_ok'] else 'MISSED'});"
            f" throughput {100 * row['throughput_ratio']:.0f}% of (b)"
            f" (target >= {100 * THROUGHPUT_TARGET:.0f}%:"
            f" {'met' if row['throughput_ok'] else 'MISSED'})"
        )
        print(
            f"workers={workers} fresh container per rollout: {row['fresh_overhead_ms']:+.1f}"
            f" ms/rollout over (b); throughput {100 * row['fresh_throughput_ratio']:.0f}% of (b)"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
