#!/usr/bin/env python3
"""What a hostile read-through cache can cost the host (issue 53, item 5), and the claims.

A cache of six DBBench rollouts (sim policy) is made once; then, each in a fresh process
(its peak resident memory is then the lookup's), one row's trajectory is replaced and the
consumer's store looks every key up:

- ``bomb``: the issue's attack, 14 KB of gzip inflating to 14 MB of ``{},{},...`` (4.6
  million dicts once parsed). Claim: the cache is skipped, nothing lands, the lookup adds
  under 64 MiB of memory and takes under 10 s.
- ``worst``: the row that costs most while within every bound (497,000 dicts and a million
  two-letter strings: 6.5 MB of JSON, 12 KB of gzip). Claim: served, under 256 MiB added.
  With ``--show``, also the seconds of ``harnessctl show --json`` on its copy (reported, no
  claim: rich's pretty printer is the cost, the same for an honest trajectory of that size).

Exits 1 when a claim fails.

usage: .venv/bin/python benchmarks/readthrough_bounds.py [--show] [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = {"bomb": (False, 64), "worst": (True, 256)}  # served?, MiB added at most


def make_cache(state: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from harnessctl.harness import load_harness
    from harnessctl.policy import Policy
    from harnessctl.run.evaluate import EvalRequest, evaluate
    from harnessctl.store import Store
    from harnessctl.suite import load_suite

    request = EvalRequest(
        harness=load_harness(ROOT / "harnesses" / "dbbench-base"),
        suite=load_suite(ROOT / "examples" / "dbbench"),
        split="dev", policy=Policy("sim/dbbench"), rollouts=2, workers=2,
        task_ids=["dev-000", "dev-020", "dev-045"],
    )  # fmt: skip
    with Store(f"sqlite:///{state / 'store.db'}", state / "trajectories") as store:
        evaluate(request, store)


def poison(cache: Path, scenario: str) -> tuple[str, int]:
    """One row's trajectory replaced; its id and the file's size."""
    path = sorted((cache / "trajectories").rglob("*.json.gz"))[0]
    real = json.loads(gzip.decompress(path.read_bytes()))
    text = json.dumps({**real, "events": []}, separators=(",", ":")).encode()
    at = text.index(b'"events":[') + len(b'"events":[')
    if scenario == "bomb":
        items = b",".join([b"{}"] * 4_600_000)
    else:
        items = b"{}," * 497_000 + b'{"x":[' + b",".join([b'"ab"'] * 1_000_000) + b"]}"
    path.write_bytes(gzip.compress(text[:at] + items + text[at:], 9))
    return path.name[:32], path.stat().st_size


def peak_kib() -> int:
    """This process's peak resident memory (``VmHWM``: unlike ``ru_maxrss``, not inherited
    across ``exec`` from the parent, which built the bomb)."""
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))


def child(cache: Path, consumer: Path) -> None:
    """The lookup, in this process: prints what it served and cost."""
    sys.path.insert(0, str(ROOT))
    from harnessctl.store import Store

    keys = [
        k for (k,) in sqlite3.connect(cache / "store.db").execute("SELECT cache_key FROM rollout")
    ]
    state = consumer / ".harnessctl"
    with Store(f"sqlite:///{state / 'store.db'}", state / "trajectories", [cache]) as store:
        before = peak_kib()
        start = time.perf_counter()
        found = store.get_by_cache_keys(keys)
        seconds = time.perf_counter() - start
        added = (peak_kib() - before) / 1024
    print(json.dumps({"served": len(found), "ids": [r.id for r in found.values()],
                      "seconds": round(seconds, 2), "added_mib": round(added, 1)}))  # fmt: skip


def run(base: Path, scenario: str, show: bool) -> dict:
    cache, consumer = base / f"{scenario}-cache", base / f"{scenario}-consumer"
    shutil.copytree(base / "cache", cache)
    poisoned, size = poison(cache, scenario)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(cache), str(consumer)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    got = json.loads(out.stdout.splitlines()[-1])
    served = poisoned in got.pop("ids")
    result = {"scenario": scenario, "gzip_bytes": size, "row_served": served, **got}
    if show and served:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "harnessctl.cli", "show", poisoned, "--json"],
            cwd=consumer, env={**os.environ, "HARNESSCTL_WORKSPACE": str(consumer)},
            stdout=subprocess.DEVNULL, check=True,
        )  # fmt: skip
        result["show_json_s"] = round(time.perf_counter() - start, 1)
    want_served, mib = CLAIMS[scenario]
    nothing = scenario == "bomb" and got["served"] == 0  # the whole cache skipped
    result["claim_holds"] = (
        served == want_served
        and got["added_mib"] <= mib
        and (nothing or want_served)
        and (scenario != "bomb" or got["seconds"] < 10)
    )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--show", action="store_true", help="time show --json on the copy")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        make_cache(base / "cache")
        results = [run(base, scenario, args.show) for scenario in CLAIMS]
    for r in results:
        print(json.dumps(r))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if all(r["claim_holds"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
