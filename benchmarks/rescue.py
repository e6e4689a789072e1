#!/usr/bin/env python3
"""Rescue latency and throughput: bounded concurrency against sequential rescue.

A trainer rescues a batch's all-fail groups while its inference servers wait, so the rescue's
wall clock is training time. This measures `harnessctl.pool.rescue_batch` (threads) and
`arescue_batch` (asyncio) on one batch of all-fail groups, at several concurrency bounds,
against an OpenAI-compatible endpoint that answers after a fixed latency (a stand-in for an
inference server: `--latency` seconds per call, default 0.5, as a 7B model on one GPU takes
for a short reply; the replies play a two-call DBBench episode: one SQL query, then an
answer). Every setting runs the same (task, sibling, seed) slots, so the results must be
identical; the script checks that.

Reports per setting: wall time of the whole batch, rollouts per second, the median and
slowest rollout latency (its sandbox's wall clock), and the speedup over sequential.

usage: .venv/bin/python benchmarks/rescue.py [--pool DIR] [--groups 6] [--group-size 4]
       [--latency 0.5] [--workers 1,2,4,8] [--json out.json]
Without --pool it builds one first (init, evolve, profile, export-pool on the sim policy:
about a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SQL = "Action: Operation\n```sql\nSELECT COUNT(*) FROM `Game Schedule`\n```"
ANSWER = 'Action: Answer\nFinal Answer: ["0"]'


def serve(latency: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(latency)
            said = SQL if len(body["messages"]) <= 2 else ANSWER
            data = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": said},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 500, "completion_tokens": 20, "total_tokens": 520},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def build_pool(root: Path) -> Path:
    ws = root / "ws"
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}

    def cli(*args: object) -> None:
        cmd = [sys.executable, "-m", "harnessctl.cli", *map(str, args)]
        subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)

    cli("init", ws)
    dirs = "execution-recovery,context-construction,observation-shaping"
    cli("evolve", "dbbench-base", "--directions", dirs, "--rounds", 1, "--rollouts", 2)
    names = [p.name for p in (ws / "harnesses").iterdir() if p.name.startswith("dbbench-base")]
    cli("profile", *sorted(names), "--split", "train", "--rollouts", 2)
    cli("export-pool", "--name", "bench-pool", "--out", root / "pool", "--include-unreproduced")
    return root / "pool"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pool", type=Path)
    parser.add_argument("--groups", type=int, default=6)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from harnessctl.pool import EndpointPolicy, Pool, arescue_batch, rescue_batch

    tmp = Path(tempfile.mkdtemp(prefix="hxbench-rescue-"))
    pool_dir = args.pool or build_pool(tmp)
    data_file = pool_dir.parent / "ws" / "examples" / "dbbench" / "dev.jsonl"
    if not data_file.is_file():
        data_file = Path(__file__).resolve().parents[1] / "examples" / "dbbench" / "dev.jsonl"
    records = [json.loads(line) for line in data_file.read_text().splitlines()]
    batch = [
        {"uid": f"g{g}", "record": records[g], "reward": 0.0}
        for g in range(args.groups)
        for _ in range(args.group_size)
    ]
    server = serve(args.latency)
    policy = EndpointPolicy(f"http://127.0.0.1:{server.server_address[1]}/v1", "bench-model")
    kwargs = dict(task_of=lambda s: s["record"], convert=lambda o, s: o.row(), k=2, seed=0)
    results, shapes = [], []
    with Pool.load(pool_dir) as pool:
        rescue_batch(pool, batch[: args.group_size], policy, **kwargs)  # warm: imports, session
        settings = [("threads", int(w)) for w in args.workers.split(",")] + [("asyncio", 8)]
        for mode, width in settings:
            t0 = time.perf_counter()
            if mode == "threads":
                out = rescue_batch(pool, batch, policy, max_workers=width, **kwargs)
            else:
                coro = arescue_batch(pool, batch, policy, max_concurrency=width, **kwargs)
                out = asyncio.run(coro)
            wall = time.perf_counter() - t0
            rollouts = out.extra_rollouts
            shapes.append(
                [(o.harness, o.seed, o.outcome) for r in out.results.values() for o in r.attempted]
            )
            latencies = [
                o.trajectory.sandbox.wall_s for r in out.results.values() for o in r.attempted
            ]
            results.append(
                {
                    "mode": mode,
                    "concurrency": width,
                    "wall_s": round(wall, 2),
                    "rollouts": rollouts,
                    "rollouts_per_s": round(rollouts / wall, 2),
                    "rollout_p50_s": round(statistics.median(latencies), 2),
                    "rollout_max_s": round(max(latencies), 2),
                }
            )
    server.shutdown()
    assert all(s == shapes[0] for s in shapes), "concurrency changed the rescue's results"
    base = results[0]["wall_s"]
    for r in results:
        r["speedup"] = round(base / r["wall_s"], 2)
    print(f"{args.groups} all-fail groups x {args.group_size} rows, {args.latency}s per call, "
          f"{os.cpu_count()} cores")  # fmt: skip
    print(f"{'mode':8} {'bound':>5} {'wall s':>7} {'rollouts/s':>10} {'p50 s':>6} {'speedup':>7}")
    for r in results:
        print(
            f"{r['mode']:8} {r['concurrency']:>5} {r['wall_s']:>7} {r['rollouts_per_s']:>10} "
            f"{r['rollout_p50_s']:>6} {r['speedup']:>7}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
