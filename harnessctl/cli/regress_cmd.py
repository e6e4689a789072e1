from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from ..constants import ENV_POLICY, ENV_SANDBOX, ENV_STORE_URL, ENV_WORKERS
from .eval_cmd import POLICY_HELP, resolve_harness
from .options import ExecutorOption, RayAddressOption, placement


def test_command(
    harnesses: Annotated[
        list[str] | None,
        typer.Argument(help="Harnesses to test (default: every harness with a baseline)."),
    ] = None,
    suite: Annotated[str | None, typer.Option(help="Suite directory.")] = None,
    baseline: Annotated[Path, typer.Option(help="Baseline profiles directory.")] = Path("profiles"),
    split: Annotated[str | None, typer.Option(help="Baseline split (if several).")] = None,
    policy: Annotated[str | None, typer.Option(help=POLICY_HELP, envvar=ENV_POLICY)] = None,
    param: Annotated[list[str] | None, typer.Option("--param", "-p")] = None,
    seed_offset: Annotated[
        int, typer.Option(help="Shift the baseline's seeds (fresh rollouts, same count).")
    ] = 0,
    min_drop: Annotated[float, typer.Option(help="Overall drop that may fail a test.")] = 0.05,
    category_min_drop: Annotated[
        float, typer.Option(help="Per-category drop that may fail a test.")
    ] = 0.15,
    fail_on_flips: Annotated[
        bool, typer.Option(help="Fail when a task flips from always-success to never.")
    ] = False,
    junit: Annotated[Path | None, typer.Option(help="Write a JUnit XML report here.")] = None,
    update_baseline: Annotated[
        bool, typer.Option(help="Re-profile and rewrite the baselines instead of testing.")
    ] = False,
    rollouts: Annotated[int, typer.Option(help="Seeds per task for --update-baseline.")] = 2,
    workers: Annotated[int | None, typer.Option(min=1, envvar=ENV_WORKERS)] = None,
    sandbox: Annotated[str | None, typer.Option(envvar=ENV_SANDBOX)] = None,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
    store: Annotated[str | None, typer.Option(envvar=ENV_STORE_URL)] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Regression-test harness variants against their baseline profiles (noise-aware: a
    check fails only on a significant drop). Exit 0: nothing regressed; 1: a regression;
    2: a usage or infrastructure error."""
    from ..errors import HarnessctlError
    from .render import err_console

    def run() -> int:
        from ..evaluate import EvalRequest, evaluate
        from ..harness import load_harness
        from ..policy import Policy, parse_params
        from ..profiles.runner import lineage_root, profile_pool
        from ..regress import baseline_path, compare, junit_xml, load_baseline
        from ..workspace import load_workspace
        from .render import console, err_console

        ws = load_workspace()
        loaded = ws.load_suite(suite)
        pol = Policy(policy or ws.config.policy, parse_params(param or []))
        root = baseline if baseline.is_absolute() else ws.root / baseline
        if harnesses:
            specs = [load_harness(resolve_harness(ws, h)) for h in harnesses]
        else:
            specs = [
                load_harness(p)
                for p in sorted(ws.harnesses_dir.iterdir())
                if (p / "harness.yaml").is_file() and (root / p.name).is_dir()
            ]
        if not specs:
            raise typer.BadParameter(f"no harness has a baseline under {root}")
        db = ws.open_store(store)
        template = EvalRequest(
            harness=specs[0],
            suite=loaded,
            split=split or "train",
            policy=pol,
            rollouts=rollouts,
            **placement(ws, workers, sandbox, executor, ray_address),
            command="test",
        )
        if update_baseline:
            base = lineage_root(specs[0], ws.harnesses_dir)
            profiled = profile_pool(specs, base, template, db, out_dir=root)
            for path in profiled.paths:
                console().print(f"wrote {path}")
            return 0
        checks = []
        for spec in specs:
            path = baseline_path(root, spec.name, pol.id, loaded.name, split)
            data = load_baseline(path)
            seeds = sorted(int(s) for s in data["seeds"])
            request = replace(
                template,
                harness=spec,
                split=data["split"],
                rollouts=len(seeds),
                seed=seeds[0] + seed_offset,
            )
            result = evaluate(request, db)
            if result.infra_failed:
                raise typer.Exit(2)
            checks += compare(
                spec.name,
                data,
                result.rows,
                min_drop=min_drop,
                category_min_drop=category_min_drop,
                fail_on_flips=fail_on_flips,
            )
        if junit is not None:
            junit_xml(checks, junit)
        failed = [c for c in checks if not c.passed]
        if as_json:
            console().print_json(json.dumps([vars(c) for c in checks], default=str))
        else:
            for c in checks:
                if not c.passed:
                    err_console().print(
                        f"[red]FAIL[/] {c.harness} {c.name}: {c.message}", soft_wrap=True
                    )
                elif c.name in ("overall", "flips"):
                    console().print(f"ok   {c.harness} {c.name}: {c.message}", soft_wrap=True)
            console().print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
        return 1 if failed else 0

    try:
        code = run()
    except HarnessctlError as exc:
        err_console().print(f"[bold red]error:[/] {exc}", soft_wrap=True)
        raise typer.Exit(2) from None
    raise typer.Exit(code)
