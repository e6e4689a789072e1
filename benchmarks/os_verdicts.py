#!/usr/bin/env python3
"""OS verdicts against AgentBench v0.2's: every task of the standard split, three replies each.

For each task of ``examples/os_interaction/standard`` (AgentBench's standard split, 144 tasks)
and each reply of ``tests.helpers.agentbench_os.plans`` (the gold: the environment's replay
script; a wrong commit; the gold's commands left unfinished), the verdict of harnessctl's
environment (its episode and score, real task containers) is compared with the verdict of
the reference judge written from AgentBench's behaviour (``tests/helpers/agentbench_os.py``),
each in a container of its own. For every task with a ``start`` script, the agent's shell
after setup (user and directory) is compared too.

Tasks that cannot be provisioned offline (their setup or gold installs packages from the
network: 6.new.5, 6.new.6, 6.new.8) and a task whose expected answer moves with time in
AgentBench too (7.bootstrap.6: the share of memory in use) are run and listed apart; a
disagreement on any other task, or a shell that differs, makes the run exit 1.

usage:
  .venv/bin/python benchmarks/os_verdicts.py [--tasks ID,ID] [--workers 2]
                                             [--expected snapshot|live] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harnessctl.envs.os_interaction import OSEnvironment  # noqa: E402
from harnessctl.envs.os_interaction.tasks import load_tasks  # noqa: E402
from tests.helpers.agentbench_os import NOT_OFFLINE, VOLATILE, agreement, compare_shell  # noqa: E402

STANDARD = ROOT / "examples" / "os_interaction" / "standard"


def one(env: OSEnvironment, task) -> list[dict]:
    started = time.monotonic()
    rows = [
        {
            "task": task.id,
            "reply": kind,
            "harnessctl": ours.success,
            "agentbench": theirs.success,
            "agree": ours.success == theirs.success,
            "why": [ours.why, theirs.why],
        }
        for kind, ours, theirs in agreement(env, task)
    ]
    marks = " ".join(f"{r['reply']}={'ok' if r['agree'] else 'DIFFER'}" for r in rows)
    print(f"{task.id:18} {marks} ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", help="comma-separated task ids (default: all 144)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--expected", default="snapshot", choices=["snapshot", "live"])
    parser.add_argument("--json", type=Path, help="write every row to this file")
    args = parser.parse_args()
    tasks = load_tasks(STANDARD).tasks
    if args.tasks:
        wanted = set(args.tasks.split(","))
        tasks = [t for t in tasks if t.id in wanted]
    env = OSEnvironment(expected=args.expected)
    started = time.monotonic()
    with ThreadPoolExecutor(args.workers) as pool:
        rows = [row for rows in pool.map(lambda t: one(env, t), tasks) for row in rows]
        with_start = [t for t in tasks if t.record["start"]]
        shells = list(pool.map(lambda t: compare_shell(env, t), with_start))
    seconds = time.monotonic() - started
    apart = NOT_OFFLINE + VOLATILE
    bad = [r for r in rows if not r["agree"] and r["task"] not in apart]
    offline_only = [r for r in rows if not r["agree"] and r["task"] in NOT_OFFLINE]
    volatile = [r for r in rows if not r["agree"] and r["task"] in VOLATILE]
    bad_shells = [s for s in shells if not s["agree"]]
    for kind in ("gold", "wrong", "unfinished"):
        mine = [r for r in rows if r["reply"] == kind and r["task"] not in apart]
        agree = sum(r["agree"] for r in mine)
        passed = sum(r["agentbench"] for r in mine)
        print(f"{kind:10} agree {agree}/{len(mine)}  (AgentBench passes {passed})")
    print(f"shells after start: agree {len(shells) - len(bad_shells)}/{len(shells)}")
    print(f"not provisionable offline ({', '.join(NOT_OFFLINE)}): {len(offline_only)} differ")
    print(f"volatile in AgentBench too ({', '.join(VOLATILE)}): {len(volatile)} differ")
    for r in bad:
        print(
            f"DISAGREE {r['task']} {r['reply']}: harnessctl {r['harnessctl']} ({r['why'][0]}),"
            f" AgentBench {r['agentbench']} ({r['why'][1]})"
        )
    for s in bad_shells:
        print(
            f"DISAGREE {s['task']} shell: harnessctl {s['harnessctl']!r}, "
            f"AgentBench {s['agentbench']!r}"
        )
    print(f"{len(tasks)} tasks, {len(rows)} replies, {seconds:.0f} s, {args.workers} workers")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "shells": shells}, indent=1))
    return 1 if bad or bad_shells else 0


if __name__ == "__main__":
    sys.exit(main())
