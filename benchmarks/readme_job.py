#!/usr/bin/env python3
"""The README's first command, cold and cached: wall seconds of each, and whether the host
process imported litellm (it should not: the offline test double is answered by the gateway
itself, and a cached run makes no rollout).

A fresh workspace (`harnessctl init`), then the README's eval of `dbbench-base` (dev split,
sim/dbbench, 3 rollouts per task, 2 workers) once cold and --runs times cached, each a fresh
process as a user's shell runs it. Imports are read from `python -X importtime`.

usage:
  .venv/bin/python benchmarks/readme_job.py [--runs 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EVAL = ["eval", "dbbench-base", "--suite", "examples/dbbench", "--split", "dev",
        "--policy", "sim/dbbench", "--rollouts", "3", "--workers", "2"]  # fmt: skip


def run(ws: Path) -> tuple[float, bool, str]:
    """Wall seconds, whether litellm was imported, and the last line printed."""
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    cmd = [sys.executable, "-X", "importtime", "-m", "harnessctl.cli", *EVAL]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        tail = "\n".join(line for line in proc.stderr.splitlines() if "import time:" not in line)
        raise SystemExit(f"eval failed (exit {proc.returncode}):\n{tail[-2000:]}")
    imported = any(
        re.match(r"import time:.*\|\s+litellm$", line.rstrip()) for line in proc.stderr.splitlines()
    )
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    return took, imported, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="cached runs")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    ws = Path(tempfile.mkdtemp(prefix="hxbench-readme-")) / "ws"
    subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", "init", str(ws)], check=True, capture_output=True
    )
    cold, cold_litellm, _ = run(ws)
    cached = [run(ws) for _ in range(args.runs)]
    figures = {
        "cold_s": round(cold, 2),
        "cold_imported_litellm": cold_litellm,
        "cached_median_s": round(statistics.median(t for t, _, _ in cached), 2),
        "cached_max_s": round(max(t for t, _, _ in cached), 2),
        "cached_imported_litellm": any(i for _, i, _ in cached),
        "cached_says": cached[-1][2],
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
