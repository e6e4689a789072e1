#!/usr/bin/env python3
"""Throughput of `--executor ray` against the local executor at the same worker count.

Standard library plus harnessctl (and Ray). For each worker count, each executor first runs
a short warm-up evaluation (the local executor starts its gateway and sandbox; Ray starts
its worker processes, which import harnessctl and litellm and warm a session each), then a
timed evaluations of fresh rollouts (new (task, seed) pairs, so nothing is served from the
cache) of `dbbench-base` with the offline policy `sim/dbbench` into a fresh SQLite store.
Reported: rollouts per second in steady state (the second timed evaluation: Ray may still
start worker processes during the first), the first's, the warm-up's wall time, and
ray / local in steady state.

usage:
  .venv/bin/python benchmarks/executors.py [--rollouts 60] [--workers 1 2] [--sandbox local]
      [--ray-address ADDR] [--json out.json]

Without --ray-address a local Ray cluster is started with as many CPUs as the largest worker
count. To measure a multi-node cluster: `ray start --head` on one machine, `ray start
--address HEAD:6379` on the others (each with the same harnessctl installed, and the docker
image built if --sandbox docker), then run this on the head with --ray-address auto and
--workers up to the cluster's CPU count.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def workspace() -> Path:
    ws = Path(tempfile.mkdtemp(prefix="hxbench-exec-"))
    shutil.copytree(ROOT / "harnesses" / "dbbench-base", ws / "harnesses" / "dbbench-base")
    shutil.copytree(ROOT / "examples" / "dbbench", ws / "examples" / "dbbench")
    return ws


def measure(executor: str, workers: int, n: int, sandbox: str, address: str | None) -> dict:
    from harnessctl.harness import load_harness
    from harnessctl.policy import Policy
    from harnessctl.run.evaluate import EvalRequest, evaluate
    from harnessctl.store import Store
    from harnessctl.suite import load_suite

    ws = workspace()
    try:
        suite = load_suite(ws / "examples" / "dbbench")
        store = Store(f"sqlite:///{ws / 'store.db'}", ws / "trajectories")
        tasks = [t.id for t in suite.tasks("dev").tasks]
        base = EvalRequest(
            harness=load_harness(ws / "harnesses" / "dbbench-base"),
            suite=suite,
            split="dev",
            policy=Policy("sim/dbbench"),
            rollouts=1,
            workers=workers,
            sandbox=sandbox,
            executor=executor,
            ray_address=address,
        )
        warm = dict(vars(base), task_ids=tasks[: 2 * workers], seed=10_000)
        started = time.perf_counter()
        evaluate(EvalRequest(**warm), store)
        warmup_s = time.perf_counter() - started
        # two timed evaluations of n fresh rollouts each (the next n (task, seed) pairs):
        # the first may still start worker processes (Ray starts them as load grows, each
        # importing harnessctl and litellm once); the second is the steady state reported
        walls = []
        for offset in (0, n):
            pairs = [(tasks[i % len(tasks)], i // len(tasks)) for i in range(offset, offset + n)]
            started = time.perf_counter()
            result = evaluate(EvalRequest(**dict(vars(base), pairs=pairs)), store)
            walls.append(time.perf_counter() - started)
            assert result.executed == n and not result.infra_failed, "rollouts failed"
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    return {
        "warmup_s": warmup_s,
        "first_rollouts_per_s": n / walls[0],
        "wall_s": walls[1],
        "rollouts_per_s": n / walls[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=60)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--sandbox", default="local")
    parser.add_argument("--ray-address", default=None)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import ray

    ray.init(
        address=args.ray_address,
        num_cpus=None if args.ray_address else max(args.workers),
        include_dashboard=False,
    )
    results: dict = {
        "rollouts": args.rollouts,
        "cpus": os.cpu_count(),
        "sandbox": args.sandbox,
        "ray_address": args.ray_address or "local cluster",
        "ray_version": ray.__version__,
    }
    for workers in args.workers:
        row = {
            executor: measure(executor, workers, args.rollouts, args.sandbox, args.ray_address)
            for executor in ("local", "ray")
        }
        row["ray_over_local"] = row["ray"]["rollouts_per_s"] / row["local"]["rollouts_per_s"]
        results[f"workers={workers}"] = row
        for executor in ("local", "ray"):
            m = row[executor]
            print(
                f"workers={workers} {executor:5s} {m['rollouts_per_s']:6.2f} rollouts/s"
                f" steady, {m['first_rollouts_per_s']:6.2f} in the first timed run"
                f" (warm-up {m['warmup_s']:.1f} s)"
            )
        print(f"workers={workers} ray / local throughput: {row['ray_over_local']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
