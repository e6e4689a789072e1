#!/usr/bin/env python3
"""The local model on a machine at load > 10: does the server pick threads that keep it
generating, and do its rollouts end in model outcomes rather than `harness_error`?

Starts `--busy` busy loops at normal priority (each ends by itself after `--for-s`, so none
outlives a killed run), waits until the run queue holds them, then:

1. starts the server with every allowed core as a thread (what a fixed `--threads` equal to
   the core count does) and records the speed it measures at start; then the server with its
   own choice (`threads` unset) and the same;
2. with the second server, runs `--tasks` DBBench dev tasks (one rollout each) of
   `dbbench-base` through harnessctl's evaluation (sandbox, gateway, litellm) under the
   default model-call timeout.

Prints one JSON object: the run queue (mean of `procs_running` minus this process) and the
1-minute load average during the run, both servers' threads and tokens/s, and each rollout's
outcome, calls, attempts and latencies. Exits 1 when the claim fails: a rollout ended in
anything but a model outcome (`timeout`, the agent's own wall clock, counts as one;
`harness_error` and `infra_error` do not), or a call was sent more than once.

usage: .venv/bin/python benchmarks/local_model_load.py [--model qwen2.5-coder-0.5b]
       [--busy 12] [--tasks dev-000] [--max-calls 4] [--max-tokens 128] [--for-s 420]
Needs the `local-model` extra and the model cached (`scripts/local-model --model NAME` once).
The load slows everything else on the machine while it runs: keep it short.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL_OUTCOMES = {"success", "wrong_answer", "invalid_format", "invalid_action", "tool_error",
                  "step_limit", "context_limit", "timeout"}  # fmt: skip


def spin(until: float) -> None:
    while time.time() < until:
        pass


def run_queue(samples: list[float], stop: threading.Event) -> None:
    """procs_running every 0.5 s, this process's sampling thread not counted."""
    while not stop.wait(0.5):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("procs_running"):
                samples.append(int(line.split()[1]) - 1)


def rollouts(model, tasks: list[str], max_calls: int, max_tokens: int) -> list[dict]:
    from harnessctl.policy import Policy
    from harnessctl.run.evaluate import EvalRequest, evaluate
    from harnessctl.workspace import load_workspace

    with tempfile.TemporaryDirectory(prefix="hx-load-") as tmp:
        ws_root = Path(tmp)
        shutil.copytree(ROOT / "harnesses" / "dbbench-base", ws_root / "harnesses" / "dbbench-base")
        shutil.copytree(ROOT / "examples" / "dbbench", ws_root / "examples" / "dbbench")
        (ws_root / "harnessctl.yaml").write_text("suite: examples/dbbench\nworkers: 1\n")
        ws = load_workspace(ws_root)
        policy = Policy(model.model, {"api_base": model.api_base, "max_tokens": max_tokens})
        request = EvalRequest(
            harness=ws.load_harness("dbbench-base"), suite=ws.load_suite(None), split="dev",
            policy=policy, rollouts=1, workers=1, max_calls=max_calls, task_ids=tasks,
        )  # fmt: skip
        store = ws.open_store()
        result = evaluate(request, store)
        out = []
        for row in result.rows:
            calls = store.trajectory(row).calls
            out.append({
                "task": row.task_id, "outcome": row.outcome,
                "calls": len(calls), "attempts": [c.attempts for c in calls],
                "latency_s": [round(c.latency_s, 1) for c in calls],
                "completion_tokens": [c.completion_tokens for c in calls],
            })  # fmt: skip
        out += [{"task": key, "outcome": "infra_error (after retries)"} for key in
                result.infra_failed]  # fmt: skip
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--busy", type=int, default=12, help="busy loops (load they add)")
    parser.add_argument("--tasks", action="append", help="DBBench dev task ids (repeatable)")
    parser.add_argument("--max-calls", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--for-s", type=float, default=420, help="the loops end after this")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from harnessctl.localmodel import LocalModel

    until = time.time() + args.for_s
    loops = [multiprocessing.Process(target=spin, args=(until,), daemon=True)
             for _ in range(args.busy)]  # fmt: skip
    samples: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=run_queue, args=(samples, stop), daemon=True)
    report: dict = {"model": args.model, "busy_loops": args.busy}
    t0 = time.monotonic()
    try:
        for loop in loops:
            loop.start()
        sampler.start()
        time.sleep(2)
        every = len(os.sched_getaffinity(0))
        servers = {}
        for label, threads in (("all_cores", every), ("auto", None)):
            with LocalModel(model=args.model, threads=threads, ctx=4096, timeout_s=600) as m:
                servers[label] = {"threads": m.threads, "start_tokens_per_s": m.tokens_per_s}
                if label == "auto":
                    report["rollouts"] = rollouts(m, args.tasks or ["dev-000"], args.max_calls,
                                                  args.max_tokens)  # fmt: skip
        report["servers"] = servers
    finally:
        stop.set()
        for loop in loops:
            loop.kill()
            loop.join()
    report["run_queue_mean"] = round(sum(samples) / max(len(samples), 1), 1)
    report["load_average_1min_at_end"] = round(os.getloadavg()[0], 1)
    report["wall_s"] = round(time.monotonic() - t0, 1)
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    rows = report.get("rollouts", [])
    other = [r for r in rows if r["outcome"] not in MODEL_OUTCOMES]
    resent = [r for r in rows if any(a > 1 for a in r.get("attempts", []))]
    if other or resent or not rows:
        print(f"claim failed: {len(other)} rollout(s) not a model outcome, {len(resent)} "
              "with a call sent again", file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
