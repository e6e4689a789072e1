#!/usr/bin/env python3
"""The README's evolve command of each environment, under the default gate.

For every environment with an offline policy: `harnessctl init` a fresh workspace, then
`harnessctl evolve BASE --suite SUITE --json` exactly as the README gives it (the sim policy,
the rule-based editor, the sequential gate with FDR control), and print per environment the
accepted directions, the judgements, the rollouts spent and the wall time. The figures depend
on the seeded simulators and catalogues, not on the machine (the time does).

usage:
  .venv/bin/python benchmarks/env_evolve.py [--envs alfworld,os,tau2,miniwob,dbbench]
      [--json out.json] [--min-accepted 2]   (exits 1 when an environment accepts fewer directions)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENVIRONMENTS = {
    "dbbench": ("dbbench-base", "examples/dbbench"),
    "alfworld": ("alfworld-base", "examples/alfworld"),
    "os": ("os-base", "examples/os_interaction"),
    "tau2": ("tau2-base", "examples/tau2"),
    "miniwob": ("miniwob-base", "examples/miniwob"),
}


def evolve(label: str) -> dict:
    base, suite = ENVIRONMENTS[label]
    ws = Path(tempfile.mkdtemp(prefix=f"hxbench-evolve-{label}-")) / "ws"
    cli = [sys.executable, "-m", "harnessctl.cli"]
    subprocess.run([*cli, "init", str(ws)], check=True, capture_output=True)
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    started = time.monotonic()
    proc = subprocess.run(
        [*cli, "evolve", base, "--suite", suite, "--json"],
        cwd=ws, env=env, capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"{label}: evolve exited {proc.returncode}: {proc.stderr[-2000:]}")
    out = json.loads(proc.stdout[proc.stdout.index("{") :])
    edits = out.get("edits", [])
    judged = [e for e in edits if e.get("status") in ("accepted", "evaluated")]
    return {
        "base": base,
        "accepted": sorted(out.get("best", {})),
        "edits": len(edits),
        "judged": len(judged),
        "accepted_edits": sum(1 for e in edits if e.get("status") == "accepted"),
        "error_control": out.get("error_control"),
        "wall_s": round(seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default="alfworld,os,tau2,miniwob")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--min-accepted", type=int, default=2,
        help="exit 1 when an environment accepts fewer directions (the README's claim)",
    )  # fmt: skip
    args = parser.parse_args()
    figures = {}
    for label in args.envs.split(","):
        figures[label] = evolve(label)
        f = figures[label]
        print(
            f"{label} ({f['base']}): accepted {', '.join(f['accepted']) or 'none'} | "
            f"{f['accepted_edits']} of {f['judged']} judged edits accepted "
            f"({f['edits']} proposed) | {f['wall_s']} s",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    short = [k for k, f in figures.items() if len(f["accepted"]) < args.min_accepted]
    if short:
        print(f"FAIL: fewer than {args.min_accepted} directions accepted: {', '.join(short)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
