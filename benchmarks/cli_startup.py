#!/usr/bin/env python3
"""Start-up time of the command line: `harnessctl --help`, every command's `--help` and
`--version`, each a fresh process, as a user's shell runs them.

Standard library only. Each command line runs --runs times, interleaved across command
lines (round after round, so a slow moment of a busy machine spreads over all of them
rather than landing on one); reported: median and max wall seconds per command line and
the slowest median. The goal is every median under 0.5 s.

usage:
  .venv/bin/python benchmarks/cli_startup.py [--runs 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = [
    ["--help"],
    ["--version"],
    *[
        [name, "--help"]
        for name in (
            "eval",
            "evolve",
            "profile",
            "route",
            "export-pool",
            "rescue-sim",
            "test",
            "report",
            "export-edits",
            "show",
            "rollouts",
            "init",
        )
    ],
    ["pool", "verify", "--help"],
]


def once(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per command line")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    times: dict[str, list[float]] = {" ".join(c): [] for c in COMMANDS}
    for command in COMMANDS:  # warm the file cache once, untimed
        once(command)
    for _ in range(args.runs):
        for command in COMMANDS:
            times[" ".join(command)].append(once(command))
    rows = {
        name: {"median_s": round(statistics.median(t), 3), "max_s": round(max(t), 3)}
        for name, t in times.items()
    }
    width = max(len(n) for n in rows)
    for name, row in rows.items():
        print(
            f"harnessctl {name:<{width}}  median {row['median_s']:.3f} s  max {row['max_s']:.3f} s"
        )
    slowest = max(rows.items(), key=lambda kv: kv[1]["median_s"])
    print(f"slowest median: harnessctl {slowest[0]} {slowest[1]['median_s']:.3f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
