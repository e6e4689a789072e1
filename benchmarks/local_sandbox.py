#!/usr/bin/env python3
"""Per-rollout cost of the local sandbox: bubblewrap containment against the previous backend.

Runs the same episodes (tasks dev-000.. of examples/dbbench, seed 0, harness dbbench-base,
the offline policy sim/dbbench on a real gateway in this process) through

* hardened: `LocalSandbox()`, the default: a bwrap container per rollout (read-only binds of
  exactly the interpreter, its stdlib, the runtime, the environment's code and the harness;
  the task directory writable; private /tmp and /dev/shm; new user, PID, network, IPC and
  UTS namespaces; rlimits);
* previous: `LocalSandbox(bwrap="")`, the backend before bubblewrap (what the fallback
  still runs when bwrap cannot): the sandbox user on the host's filesystem, with `unshare`
  network and PID namespaces where they work, and the same rlimits;

in interleaved rounds, so a change in the machine's load hits both alike, at each worker
count. It reports each one's per-round ms/rollout, the medians, the difference and the
throughput ratio. Both loops do the same work per episode (prepare the task files, open the
rollout at the gateway, run the sandbox, close, check the result and its model calls); the
prompt tokens of every loop are printed as evidence.

usage: .venv/bin/python benchmarks/local_sandbox.py [--rollouts 20] [--rounds 5]
           [--worker-counts 1,2] [--json out.json]
Needs bwrap (Debian's bubblewrap); imports harnessctl.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

from docker_sandbox import LIMITS, Episodes, give_to_sandbox, timed_loop

from harnessctl.sandbox import Job
from harnessctl.sandbox.local import LocalSandbox


def through(episodes: Episodes, backend: LocalSandbox):
    """One episode through ``backend``, as ``RolloutSession.run`` runs it."""

    def one(_w: int, i: int) -> None:
        workdir = Path(tempfile.mkdtemp(prefix="job-", dir=episodes.root))
        give_to_sandbox(workdir)
        rollout_id, token, env = episodes.open(i, workdir)
        code = episodes.env.sandbox_code
        job = Job(rollout_id, episodes.harness, workdir, env, LIMITS, (code,))
        res = backend.run(job)
        if res.infra_error or res.exit_code != 0:
            raise RuntimeError(f"rollout failed: {res.infra_error or res.exit_code}")
        episodes.close(rollout_id, token, workdir)
        shutil.rmtree(workdir)

    return one


def bench(workers: int, n: int, rounds: int) -> dict:
    backends = {"hardened": LocalSandbox(), "previous": LocalSandbox(bwrap="")}
    times: dict[str, list[float]] = {k: [] for k in backends}
    tokens: dict[str, int] = {}
    with Episodes(n) as episodes:
        gw_dir = episodes.gateway.socket_path.parent  # type: ignore[union-attr]
        try:
            for backend in backends.values():
                backend.start(gw_dir)
            if backends["hardened"].isolation.get("tool") != "bwrap":
                raise SystemExit(f"bwrap cannot run here: {backends['hardened'].isolation}")
            loops = {k: through(episodes, b) for k, b in backends.items()}
            for one in loops.values():  # warm-up: first imports, first harness copies
                timed_loop(workers, workers, one)
            for _ in range(rounds):
                for name, one in loops.items():
                    before = episodes.prompt_tokens
                    times[name].append(1000 * timed_loop(workers, n, one) / n)
                    tokens[name] = episodes.prompt_tokens - before
        finally:
            for backend in backends.values():
                backend.close()
    medians = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    return {
        "ms_per_rollout": times,
        "median_ms_per_rollout": medians,
        "prompt_tokens_per_round": tokens,
        "hardened_over_previous_ms": medians["hardened"] - medians["previous"],
        "throughput_ratio": medians["previous"] / medians["hardened"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=20, help="episodes per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--worker-counts", default="1,2", help="comma-separated")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args()
    results: dict = {"rollouts": args.rollouts, "rounds": args.rounds, "cpus": os.cpu_count()}
    for workers in (int(w) for w in args.worker_counts.split(",")):
        row = bench(workers, args.rollouts, args.rounds)
        results[f"workers={workers}"] = row
        for name, ms in row["median_ms_per_rollout"].items():
            runs = " ".join(f"{t:.0f}" for t in row["ms_per_rollout"][name])
            tokens = row["prompt_tokens_per_round"][name]
            print(
                f"workers={workers} {name:9s} median {ms:6.1f} ms/rollout  ({runs})"
                f"  prompt tokens/round {tokens}"
            )
        print(
            f"workers={workers} hardened over previous: "
            f"{row['hardened_over_previous_ms']:+.1f} ms/rollout, throughput "
            f"{100 * row['throughput_ratio']:.0f}% of the previous backend"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
