"""A corpus worth learning from: edit records over every environment, one held out.

:func:`build_corpus` takes a workspace as ``harnessctl init`` makes it (every bundled base
harness and example suite), runs ``harnessctl evolve`` for each base harness (a harness with
no parent) on each split its environment's suite declares, with each editor (the rule-based
editor by default: its patches accepted and rejected with their reasons; any LLM editor
given too), then ``export-edits --holdout-env ENV``: every record of the held-out
environment on the test side, every other on train. The suites are copied next to the
records (``suites/``) so the corpus scores without the workspace, and ``corpus.json`` says
what was run, what failed and where each suite is::

    scripts/engineer-corpus --out corpus/ --holdout-env tau2 [--envs dbbench,tau2,...]
        [--splits train,dev] [--rounds 2] [--rollouts 2] [--max-digests 2] [--editor rules]

Nothing here names an environment: bases and suites are found by their manifests' ``env``.
An environment whose evolve fails (its extra or image missing) is listed under ``failed``
and the command exits 1 after exporting what it has.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import Field

from ..records import Record

CORPUS_VERSION = 1


class EvolveRun(Record):
    env: str
    base: str
    suite: str
    split: str
    editor: str
    seconds: float
    edits: int = 0
    accepted: int = 0
    error: str | None = None


class Corpus(Record):
    """``corpus.json``."""

    kind: str = "engineer-corpus"
    version: int = CORPUS_VERSION
    holdout_env: str
    max_digests: int | None
    environments: dict[str, list[str]]
    """Environment -> its base harnesses."""
    suites: dict[str, str]
    """Suite id -> its copy, relative to the corpus directory."""
    runs: list[EvolveRun] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)
    """Environments none of whose evolves finished."""
    counts: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0


def bases(ws: Path) -> dict[str, list[str]]:
    """Environment -> the workspace's base harnesses (no parent) of it."""
    from ..harness import load_harness

    found: dict[str, list[str]] = {}
    for path in sorted((ws / "harnesses").iterdir()):
        if not (path / "harness.yaml").is_file():
            continue
        spec = load_harness(path)
        if spec.manifest.parent is None:  # by its directory: what evolve is given
            found.setdefault(spec.manifest.env, []).append(path.name)
    return found


def suites(ws: Path) -> dict[str, Any]:
    """Environment -> the workspace's first suite of it (``examples/*/suite.yaml``)."""
    from ..suite import load_suite

    found: dict[str, Any] = {}
    for path in sorted(ws.glob("examples/*/suite.yaml")):
        suite = load_suite(path)
        found.setdefault(suite.config.env, suite)
    return found


def _cli(ws: Path, *args: Any, timeout: float = 7200) -> subprocess.CompletedProcess:
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    command = [sys.executable, "-m", "harnessctl.cli", *map(str, args)]
    return subprocess.run(
        command, cwd=ws, env=env, capture_output=True, text=True, timeout=timeout
    )  # fmt: skip


def build_corpus(
    ws: Path, out: Path, holdout_env: str, *, envs: list[str] | None = None,
    splits: tuple[str, ...] = ("train", "dev"), rounds: int = 2, rollouts: int = 2,
    editors: tuple[str, ...] = ("rules",), max_digests: int | None = None,
    only: list[str] | None = None, log: Any = print,
) -> Corpus:  # fmt: skip
    """Evolve every base of ``envs`` (default: all; ``only``: just these base harnesses) in
    ``ws`` and export the corpus to ``out`` with ``holdout_env`` held out (module docstring)."""
    from ..workspace import init_workspace

    started = time.monotonic()
    init_workspace(ws)  # completes a workspace, or makes one: nothing already there changes
    found, by_env = bases(ws), suites(ws)
    chosen = envs or sorted(found)
    if holdout_env not in chosen:
        raise SystemExit(f"--holdout-env {holdout_env} is not among the environments {chosen}")
    runs: list[EvolveRun] = []
    for env in chosen:
        suite = by_env.get(env)
        if suite is None or env not in found:
            missing = "no base harness or suite of it in the workspace"
            runs.append(EvolveRun(env=env, base="", suite="", split="", editor="", seconds=0,
                                  error=missing))  # fmt: skip
            continue
        for base in (b for b in found[env] if only is None or b in only):
            for split in (s for s in splits if s in suite.split_names):
                for editor in editors:
                    runs.append(_evolve(ws, env, base, suite, split, editor, rounds, rollouts))
                    log(_said(runs[-1]))
    args: list[Any] = ["export-edits", "--out", out, "--holdout-env", holdout_env, "--json"]
    if max_digests is not None:
        args += ["--max-digests", max_digests]
    exported = _cli(ws, *args)
    if exported.returncode:
        raise SystemExit(f"export-edits failed: {exported.stderr[-2000:]}")
    copies = {}
    for env in chosen:
        if env in by_env:
            suite = by_env[env]
            dest = out / "suites" / suite.root.name
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(suite.root, dest, ignore=shutil.ignore_patterns("__pycache__"))
            copies[suite.id] = dest.relative_to(out).as_posix()
    ok = {r.env for r in runs if r.error is None}
    corpus = Corpus(
        holdout_env=holdout_env,
        max_digests=max_digests,
        environments={e: found.get(e, []) for e in chosen},
        suites=copies,
        runs=runs,
        failed=sorted(set(chosen) - ok),
        counts=json.loads(exported.stdout[exported.stdout.index("{") :])["counts"],
        seconds=round(time.monotonic() - started, 1),
    )
    (out / "corpus.json").write_text(corpus.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return corpus


def _evolve(ws, env, base, suite, split, editor, rounds, rollouts) -> EvolveRun:
    started = time.monotonic()
    args = ["evolve", base, "--suite", suite.root, "--split", split, "--rounds", rounds]
    proc = _cli(ws, *args, "--rollouts", rollouts, "--editor", editor, "--json")
    run = EvolveRun(env=env, base=base, suite=suite.id, split=split, editor=editor,
                    seconds=round(time.monotonic() - started, 1))  # fmt: skip
    if proc.returncode:
        run.error = (proc.stderr.strip().splitlines() or ["?"])[-1][:500]
        return run
    result = json.loads(proc.stdout[proc.stdout.index("{") :])
    run.edits = len(result.get("edits", []))
    run.accepted = sum(1 for e in result.get("edits", []) if e.get("status") == "accepted")
    return run


def _said(run: EvolveRun) -> str:
    what = f"{run.env}: {run.base} on {run.split} with {run.editor}"
    if run.error:
        return f"{what}: FAILED ({run.error})"
    return f"{what}: {run.edits} edits, {run.accepted} accepted ({run.seconds:.0f} s)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--holdout-env", required=True)
    parser.add_argument("--workspace", type=Path, help="default: a new one next to --out")
    parser.add_argument("--envs", help="comma-separated environments (default: all)")
    parser.add_argument("--bases", help="comma-separated base harnesses (default: all)")
    parser.add_argument("--splits", default="train,dev")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rollouts", type=int, default=2)
    parser.add_argument("--max-digests", type=int)
    parser.add_argument("--editor", action="append", help="repeatable (default: rules)")
    args = parser.parse_args(argv)
    ws = args.workspace or args.out.with_name(args.out.name + "-workspace")
    corpus = build_corpus(
        ws.resolve(), args.out.resolve(), args.holdout_env,
        envs=args.envs.split(",") if args.envs else None, splits=tuple(args.splits.split(",")),
        rounds=args.rounds, rollouts=args.rollouts, editors=tuple(args.editor or ["rules"]),
        max_digests=args.max_digests, only=args.bases.split(",") if args.bases else None,
    )  # fmt: skip
    print(json.dumps({"counts": corpus.counts, "failed": corpus.failed, "s": corpus.seconds}))
    if corpus.failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
