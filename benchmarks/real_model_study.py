#!/usr/bin/env python3
"""The first real-model study: does evolution help a real (small) model, offline?

Every other figure of harnessctl comes from `sim/*` policies whose failure modes were written
for the catalogue's repairs. This study puts a real instruction model in the policy's seat:
Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, from the pinned PyPI parts of the local-model
catalogue) served by llama.cpp on 127.0.0.1, reached through litellm and the gateway like any
provider. Phases, each through the CLI with `--json`, in one workspace:

1. **distribution**: the base harness on DBBench (a stratified subset of the dev split, the
   study suite `examples/dbbench-study`) and on AgentBench OS (its test split), under the
   real model and under the sim, same tasks: how real are the sims' failure modes?
2. **sim-evolve**: `evolve dbbench-base` under the sim (the offline default) on the study
   suite's train split: the siblings the catalogue's repairs give there.
3. **rules-evolve**: `evolve dbbench-base` under the real model, rule-based editor, judged by
   the gate as it stands (sequential, FDR), `--max-looks` bounded for time.
4. **llm-evolve**: the same under the real model with Qwen2.5-Coder-1.5B-Instruct as the LLM
   editor (its own server): patches produced, validated and judged.
5. **bench**: `harnessctl bench` under the real model on the study suite's test split: base,
   each sibling (the sim's and any the real model accepted), the best by evidence, the
   router's Rank-1 before any rollout, a random sibling, all repairs combined, and the
   verifier arms, at equal rollouts, model calls counted, paired sign tests.

Every figure is printed with its interval, rollouts, tokens and wall time, and whatever it
shows is reported as it is. Rollouts are cached in the workspace's store and evolve runs
resume, so a study interrupted and run again with the same `--work` continues where it
stopped (the servers listen on fixed ports: the policy's `api_base` is part of its id).

usage:
  .venv/bin/python benchmarks/real_model_study.py [--preset smoke|hour|full] [--work DIR]
      [--policy-model qwen2.5-coder-0.5b] [--editor-model qwen2.5-coder-1.5b] [--json out.json]

Presets (sizes chosen to fit the time on a 2-core machine; see the README for measured
times; the OS tasks are always the suite's test split): `smoke` checks every phase in
minutes (6 DBBench tasks, one direction, one look); `hour` (12 DBBench tasks, three
directions and one for the LLM editor, two looks per judgement); `full` (24 DBBench tasks,
all five directions and two for the LLM editor, three looks).
Needs the `local-model` extra and a Docker engine (the OS tasks); fetches the models once.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DIRECTIONS = [
    "format-validation",
    "execution-recovery",
    "context-construction",
    "termination",
    "observation-shaping",
]
PRESETS: dict[str, dict] = {
    "smoke": dict(db_tasks=6, rules_dirs=DIRECTIONS[:1], llm_dirs=DIRECTIONS[:1],
                  looks=1, bench_rollouts=1, bench=False),
    "hour": dict(db_tasks=12, rules_dirs=DIRECTIONS[:3], llm_dirs=DIRECTIONS[:1],
                 looks=2, bench_rollouts=1, bench=True),
    "full": dict(db_tasks=24, rules_dirs=DIRECTIONS, llm_dirs=DIRECTIONS[:2],
                 looks=3, bench_rollouts=1, bench=True),
}  # fmt: skip
POLICY_PORT, EDITOR_PORT = 18471, 18472
#: Sampling for the policy: temperature > 0 so fresh seeds are fresh draws (the gate's
#: pairs), replies capped (the harnesses' own round limits bound the calls).
SAMPLING = ["--param", "temperature=0.7", "--param", "max_tokens=256"]
STUDY_SUITE = "examples/dbbench-study"


def harnessctl(ws: Path, *args: object, check: bool = True) -> tuple[dict, float]:
    """``harnessctl ARGS --json`` in ``ws``: its result and wall seconds."""
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", *map(str, args), "--json"],
        cwd=ws, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.monotonic() - start
    if proc.returncode != 0:
        if check:
            raise SystemExit(
                f"harnessctl {' '.join(map(str, args))} failed:\n{proc.stderr[-3000:]}"
            )
        return {"error": proc.stderr[-1000:], "exit": proc.returncode}, wall
    return json.loads(proc.stdout[proc.stdout.index("{") :]), wall


def study_suite(ws: Path, tasks: int) -> None:
    """``examples/dbbench-study``: ``tasks`` dev tasks, the same number of each category
    (INSERT, UPDATE, queries), in file order; train and test halves by a seeded partition."""
    src = ws / "examples" / "dbbench"
    dest = ws / STUDY_SUITE
    dest.mkdir(parents=True, exist_ok=True)
    lines = (src / "dev.jsonl").read_text().splitlines()
    kinds: dict[str, list[str]] = {}
    for line in lines:
        kind = json.loads(line)["type"][0]
        kinds.setdefault(kind if kind in ("INSERT", "UPDATE") else "query", []).append(line)
    chosen = [line for group in kinds.values() for line in group[: tasks // 3]]
    (dest / "study.jsonl").write_text("\n".join(chosen) + "\n")
    (dest / "suite.yaml").write_text(
        "# The real-model study's DBBench subset (benchmarks/real_model_study.py): the first\n"
        "# tasks of each kind of AgentBench's DBBench dev split (see examples/dbbench).\n"
        "name: dbbench-study\nenv: dbbench\ntasks:\n  - study.jsonl\n"
        "image: harnessctl-runtime:latest\ntimeout_s: 60\nsplits:\n  dev: {}\n"
        "  train:\n    partition: {seed: 13, fraction: 0.5, stratify: category}\n"
        "  test:\n    complement_of: train\n"
    )


def rollout_stats(ws: Path, policy_prefix: str, since: set[str]) -> dict:
    """Rollouts of the policy stored since ``since`` (ids): count, tokens."""
    from harnessctl.workspace import load_workspace

    store = load_workspace(ws).open_store()
    rows = [r for r in store.rollouts() if r.policy_id.startswith(policy_prefix)]
    new = [r for r in rows if r.id not in since]
    return {
        "rollouts": len(new),
        "prompt_tokens": sum(r.prompt_tokens for r in new),
        "completion_tokens": sum(r.completion_tokens for r in new),
    }


def rollout_ids(ws: Path) -> set[str]:
    from harnessctl.workspace import load_workspace

    return {r.id for r in load_workspace(ws).open_store().rollouts()}


def figures(summary: dict) -> dict:
    return {
        "success": f"{summary['successes']}/{summary['rollouts']}",
        "rate": round(summary["success_rate"], 3),
        "ci95": [round(x, 3) for x in summary["ci95"]],
        "outcomes": summary["outcomes"],
        "tokens": summary["prompt_tokens"] + summary["completion_tokens"],
    }


def edits_of(ws: Path, evolve_id: str) -> list[dict]:
    """Every edit of an evolve with the gate's looks and wins/losses, from the store."""
    from harnessctl.workspace import load_workspace

    out = []
    for e in load_workspace(ws).open_store().edits(evolve_id=evolve_id):
        metrics = json.loads(e.metrics_json or "{}")
        looks = metrics.get("looks") or []
        out.append({
            "direction": e.direction, "round": e.round, "attempt": e.attempt,
            "editor": e.editor, "status": e.status, "reason": e.reason,
            "detail": (e.detail or "")[:200], "rescues": e.rescues,
            "regressions": e.regressions, "looks": len(looks),
            "changed_lines": sum(1 for line in e.diff.splitlines()
                                 if line[:1] in "+-" and line[:3] not in ("+++", "---")),
        })  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="hour")
    parser.add_argument("--work", type=Path, default=Path("/tmp/hx-real-model-study"))
    parser.add_argument("--policy-model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--editor-model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--workers", type=int, default=2, help="rollouts at once (server slots)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads per server")
    parser.add_argument("--phases", default="distribution,sim-evolve,rules-evolve,llm-evolve,bench")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--directions", help="override the preset's rule-based directions")
    parser.add_argument("--max-looks", type=int, help="override the preset's looks")
    parser.add_argument("--editor-retries", type=int, default=1, help="LLM editor retries")
    parser.add_argument("--editor-temperature", type=float, default=0.2)
    parser.add_argument(
        "--editor-format", choices=("json", "blocks"), default="json",
        help="the LLM editor's edit format: json (decoded under its schema by llama.cpp) or "
        "SEARCH/REPLACE blocks",
    )  # fmt: skip
    args = parser.parse_args()
    preset = dict(PRESETS[args.preset])
    if args.directions:
        preset["rules_dirs"] = args.directions.split(",")
    if args.max_looks:
        preset["looks"] = args.max_looks
    phases = args.phases.split(",")
    from harnessctl.localmodel import LocalModel

    ws = args.work / "ws"
    if not ws.is_dir():
        subprocess.run(
            [sys.executable, "-m", "harnessctl.cli", "init", str(ws)], check=True,
            capture_output=True,
        )  # fmt: skip
    study_suite(ws, preset["db_tasks"])
    saved = args.json or args.work / "study.json"
    out: dict = {"preset": args.preset, "settings": preset, "phases": {}}
    if saved.is_file():  # a study run again continues: the phases it already measured stay
        out = json.loads(saved.read_text())
        out.pop("finished", None)

    def save() -> None:
        saved.write_text(json.dumps(out, indent=2) + "\n")

    workers = ["--workers", str(args.workers)]
    with LocalModel(
        model=args.policy_model, threads=args.threads, parallel=args.workers, port=POLICY_PORT
    ) as policy:
        real = ["--policy", policy.model, "--param", f"api_base={policy.api_base}", *SAMPLING]
        out["policy"] = {"model": policy.model, "file": str(getattr(policy, "path", ""))}
        db = ["--suite", STUDY_SUITE]
        os_suite = ["--suite", "examples/os_interaction", "--split", "test"]
        if "distribution" in phases:
            dist: dict = {}
            for env, base, suite, sim in (
                ("dbbench", "dbbench-base", [*db, "--split", "dev"], "sim/dbbench"),
                ("os", "os-base", os_suite, "sim/os_interaction"),
            ):
                before = rollout_ids(ws)
                got, wall = harnessctl(ws, "eval", base, *suite, *real, "--rollouts", 1,
                                       *workers)  # fmt: skip
                dist[env] = {"real": {**figures(got["summary"]), "wall_s": round(wall),
                                      **rollout_stats(ws, policy.model, before)}}  # fmt: skip
                got, wall = harnessctl(ws, "eval", base, *suite, "--policy", sim, "--rollouts", 1)
                dist[env]["sim"] = {**figures(got["summary"]), "wall_s": round(wall, 1)}
                print(f"[distribution] {env}: {json.dumps(dist[env])}", flush=True)
                out["phases"]["distribution"] = dist
                save()
        # the siblings every phase so far accepted (phases measured before this run included)
        siblings = [n for ph in out["phases"].values() for n in ph.get("siblings", [])]
        if "sim-evolve" in phases:
            got, wall = harnessctl(ws, "evolve", "dbbench-base", *db, "--rounds", 1,
                                   "--rollouts", 2)  # fmt: skip
            sim_siblings = [v["name"] for v in got["best"].values()]
            siblings = [*sim_siblings, *siblings]
            out["phases"]["sim-evolve"] = {
                "accepted": sorted(got["best"]), "siblings": sim_siblings, "wall_s": round(wall),
                "edits": [(e["direction"], e["status"]) for e in got["edits"]],
            }  # fmt: skip
            print(f"[sim-evolve] {json.dumps(out['phases']['sim-evolve'])}", flush=True)
            save()
        gate = ["--rounds", 1, "--rollouts", 2, "--batch", 4, "--control", 2,
                "--max-looks", preset["looks"], *workers]  # fmt: skip
        if "rules-evolve" in phases:
            before = rollout_ids(ws)
            got, wall = harnessctl(ws, "evolve", "dbbench-base", *db, *real, *gate,
                                   "--directions", ",".join(preset["rules_dirs"]))  # fmt: skip
            accepted = [v["name"] for v in got["best"].values()]
            siblings += accepted
            out["phases"]["rules-evolve"] = {
                "siblings": accepted,
                "base_success": got["base_success"], "error_control": got["error_control"],
                "accepted": sorted(got["best"]), "edits": edits_of(ws, got["evolve_id"]),
                "wall_s": round(wall), **rollout_stats(ws, policy.model, before),
            }  # fmt: skip
            print(f"[rules-evolve] {json.dumps(out['phases']['rules-evolve'])}", flush=True)
            save()
        if "llm-evolve" in phases:
            before = rollout_ids(ws)
            with LocalModel(
                model=args.editor_model, threads=args.threads, ctx=16384, port=EDITOR_PORT
            ) as editor:
                got, wall = harnessctl(
                    ws, "evolve", "dbbench-base", *db, *real, *gate,
                    "--directions", ",".join(preset["llm_dirs"]), "--editor", editor.model,
                    "--editor-param", f"api_base={editor.api_base}",
                    "--editor-param", "max_tokens=1024",
                    "--editor-param", f"temperature={args.editor_temperature}",
                    "--editor-param", f"edit_format={args.editor_format}",
                    # a 1.5B on two busy CPU cores may read an editor prompt for minutes
                    "--editor-param", "timeout=1200", "--editor-retries", args.editor_retries,
                    check=False,
                )  # fmt: skip
            if "error" in got:
                out["phases"]["llm-evolve"] = {"error": got["error"], "wall_s": round(wall)}
                print(f"[llm-evolve] failed: {got['error']}", flush=True)
                save()
                got = {}
        if "llm-evolve" in phases and got.get("evolve_id"):
            accepted = [v["name"] for v in got["best"].values()]
            siblings += accepted
            edits = edits_of(ws, got["evolve_id"])
            out["phases"]["llm-evolve"] = {
                "editor": editor.model, "accepted": sorted(got["best"]), "siblings": accepted,
                "edits": edits,
                "proposals": len(edits),
                "rejected": dict(Counter(e["reason"] for e in edits if e["status"] == "rejected")),
                "judged": sum(1 for e in edits if e["status"] != "rejected"),
                "wall_s": round(wall), **rollout_stats(ws, policy.model, before),
            }  # fmt: skip
            print(f"[llm-evolve] {json.dumps(out['phases']['llm-evolve'])}", flush=True)
            save()
        if "bench" in phases and preset["bench"] and siblings:
            before = rollout_ids(ws)
            pool = ",".join(dict.fromkeys(siblings))
            got, wall = harnessctl(ws, "bench", "dbbench-base", *db, *real, *workers,
                                   "--siblings", pool, "--rollouts", preset["bench_rollouts"],
                                   "--attempts", 2)  # fmt: skip
            out["phases"]["bench"] = {
                "pairs": got["pairs"], "best_sibling": got["best_sibling"],
                "combined": got["combined_siblings"], "left_out": got["combined_left_out"],
                "arms": [{k: a[k] for k in ("name", "verifier", "successes", "success_rate",
                                             "ci95", "rollouts", "model_calls", "vs_best_p",
                                             "vs_base_p")} for a in got["arms"]],
                "wall_s": round(wall), **rollout_stats(ws, policy.model, before),
            }  # fmt: skip
            print(f"[bench] {json.dumps(out['phases']['bench'])}", flush=True)
            save()
    out["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    save()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
