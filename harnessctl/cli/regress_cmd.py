"""``harnessctl test``: regression tests of harness variants against baseline profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import (
    ExecutorOption,
    FreshContainerOption,
    JsonOption,
    ParamOption,
    PolicyOption,
    RayAddressOption,
    SandboxOption,
    StoreOption,
    SuiteOption,
    WorkersOption,
    eval_request,
    finite,
    placement,
    policy_of,
)

HarnessesArg = Annotated[
    list[str] | None,
    typer.Argument(help="Harnesses to test (default: every harness with a baseline)."),
]
BaselineOption = Annotated[Path, typer.Option(help="Baseline profiles directory.")]
SplitOption = Annotated[str | None, typer.Option(help="Baseline split (if several).")]
SeedOffsetOption = Annotated[
    int, typer.Option(help="Shift the baseline's seeds (fresh rollouts, same count).")
]
MinDropOption = Annotated[
    float,
    typer.Option(min=0.0, max=1.0, callback=finite, help="Overall drop that may fail a test."),
]
CategoryDropOption = Annotated[
    float,
    typer.Option(min=0.0, max=1.0, callback=finite, help="Per-category drop that may fail a test."),
]
FlipsOption = Annotated[
    bool, typer.Option(help="Fail when a task flips from always-success to never.")
]
JunitOption = Annotated[Path | None, typer.Option(help="Write a JUnit XML report here.")]
UpdateOption = Annotated[
    bool, typer.Option(help="Re-profile and rewrite the baselines instead of testing.")
]
RolloutsOption = Annotated[int, typer.Option(min=1, help="Seeds per task for --update-baseline.")]


def test_command(
    harnesses: HarnessesArg = None,
    suite: SuiteOption = None,
    baseline: BaselineOption = Path("profiles"),
    split: SplitOption = None,
    policy: PolicyOption = None,
    param: ParamOption = None,
    seed_offset: SeedOffsetOption = 0,
    min_drop: MinDropOption = 0.05,
    category_min_drop: CategoryDropOption = 0.15,
    fail_on_flips: FlipsOption = False,
    junit: JunitOption = None,
    update_baseline: UpdateOption = False,
    rollouts: RolloutsOption = 2,
    workers: WorkersOption = None,
    sandbox: SandboxOption = None,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
    fresh_container: FreshContainerOption = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Regression-test harness variants against their baseline profiles (noise-aware: a
    check fails only on a significant drop). Exit 0: nothing regressed; 1: a regression;
    2: a usage or configuration error; 3: rollouts failed on infrastructure (the checks
    that could run are reported and written to --junit)."""
    from ..regress import runner
    from ..workspace import load_workspace
    from .progress import rollout_progress
    from .render import err_console

    ws = load_workspace()
    root = baseline if baseline.is_absolute() else ws.root / baseline
    specs = [ws.load_harness(h) for h in harnesses or []] or runner.baselined(ws, root)
    if not specs:
        raise typer.BadParameter(f"no harness has a baseline under {root}")
    pol = policy_of(ws, policy, param, specs[0].manifest.env)
    where = placement(ws, workers, sandbox, executor, ray_address, fresh_container)
    template = eval_request(
        ws, specs[0], suite, pol, where, split=split or "train", rollouts=rollouts, command="test"
    )
    db = ws.open_store(store)
    if update_baseline:
        _update_baselines(ws, specs, template, db, root)
        raise typer.Exit(0)
    thresholds = runner.Thresholds(min_drop, category_min_drop, fail_on_flips)
    with rollout_progress(err_console(), events=as_json) as progress:
        result = runner.run_regression(
            specs, template, db, root, thresholds, split=split, seed_offset=seed_offset,
            progress=progress,
        )  # fmt: skip
    render_checks(result, junit=junit, as_json=as_json)
    raise typer.Exit(3 if result.infra_failed else 1 if result.failed else 0)


def _update_baselines(ws, specs, template, db, root: Path) -> None:
    """``test --update-baseline``: re-profile, write the baselines, commit them."""
    from ..regress import runner
    from .progress import rollout_progress
    from .render import console, err_console, escape
    from .written import commit_written

    with rollout_progress(err_console()) as progress:
        paths = runner.update_baselines(specs, template, db, ws, root, progress)
    for path in paths:
        console().print(f"wrote {escape(str(path))}")
    commit_written(ws, paths, f"test --update-baseline: {len(specs)} harness(es)", template)


def render_checks(result, *, junit: Path | None, as_json: bool) -> None:
    from ..regress import junit_xml
    from .render import console, err_console, escape, print_result

    if junit is not None:
        junit_xml(result.checks, junit, result.errors)
    for harness, why in result.errors.items():  # on stderr, with --json too
        err_console().print(f"[red]ERROR[/] {escape(f'{harness}: {why}')}", soft_wrap=True)
    if result.errors:
        err_console().print("run the command again to retry the rollouts that failed")
    if as_json:
        print_result(result)
        return
    for c in result.checks:
        if not c.passed:
            err_console().print(
                f"[red]FAIL[/] {escape(f'{c.harness} {c.name}: {c.message}')}", soft_wrap=True
            )
        elif c.name in ("overall", "flips"):
            console().print(escape(f"ok   {c.harness} {c.name}: {c.message}"), soft_wrap=True)
    passed = len(result.checks) - len(result.failed)
    console().print(f"{passed} passed, {len(result.failed)} failed")
    if result.run_id:
        short = result.run_id[:12]
        console().print(f"run {short}; each harness's evaluation: harnessctl show {short}")
