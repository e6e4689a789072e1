"""``harnessctl eval``: one harness on a suite split, or base vs Rank-1 routed."""

from __future__ import annotations

from typing import Annotated

import typer

from ..constants import DEFAULT_ROLLOUTS, DEFAULT_TIMEOUT_S
from .options import (
    ConfirmAboveOption,
    ExecutorOption,
    FreshContainerOption,
    JsonOption,
    MaxCallsOption,
    MaxTokensOption,
    ModelTimeoutOption,
    ParamOption,
    PolicyOption,
    RayAddressOption,
    RolloutsOption,
    SandboxOption,
    SeedOption,
    StoreOption,
    SuiteOption,
    TimeoutOption,
    WorkersOption,
    eval_request,
    one_of,
    placement,
    policy_of,
    pool_arg,
)
from .preflight_view import YesOption

HarnessArg = Annotated[str, typer.Argument(help="Harness directory, or a name under harnesses/.")]
TaskOption = Annotated[
    list[str] | None, typer.Option("--task", help="Only these task ids (repeatable).")
]
RouterOption = Annotated[
    str | None,
    typer.Option(
        help="Rank-1 routed eval: POOL (a directory of harnesses, of which those of "
        "HARNESS's lineage count, or comma-separated names) with current profiles under "
        "this policy; each task runs under the router's first choice (see --route-when). "
        "See docs/profiles.md.",
    ),
]
RouteWhenOption = Annotated[
    str,
    typer.Option(
        help="With --router: 'before' routes every task from its category before any rollout "
        "(no verifier, equal rollouts); 'failed' routes only tasks HARNESS failed, from its "
        "failure outcomes (verifier access: the routed side spends extra rollouts).",
        callback=one_of("before", "failed"),
    ),
]


def eval_command(
    harness: HarnessArg,
    suite: SuiteOption = None,
    split: Annotated[str, typer.Option(help="Split of the suite to run.")] = "dev",
    policy: PolicyOption = None,
    param: ParamOption = None,
    rollouts: RolloutsOption = DEFAULT_ROLLOUTS,
    seed: SeedOption = 0,
    workers: WorkersOption = None,
    sandbox: SandboxOption = None,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
    fresh_container: FreshContainerOption = False,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    max_calls: MaxCallsOption = None,
    max_tokens: MaxTokensOption = None,
    model_timeout: ModelTimeoutOption = None,
    task: TaskOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
    router: RouterOption = None,
    route_when: RouteWhenOption = "before",
    yes: YesOption = False,
    confirm_above: ConfirmAboveOption = None,
) -> None:
    """Evaluate a harness on a suite split: cached rollouts are served from the store, the
    rest run in sandboxes; prints success with a 95% interval, outcomes, tokens and cost.
    A real model is checked before its first new rollout (exit 2 in seconds), the cost
    bound printed (above the threshold: --yes); exit 1 when every rollout is harness_error."""
    from ..run.evaluate import evaluate
    from ..sandbox import Limits
    from ..workspace import load_workspace
    from .preflight_view import cost_gate
    from .progress import rollout_progress
    from .render import err_console
    from .summary_view import render_eval

    ws = load_workspace()
    spec = ws.load_harness(harness)
    request = eval_request(
        ws, spec, suite, policy_of(ws, policy, param, spec.manifest.env),
        placement(ws, workers, sandbox, executor, ray_address, fresh_container),
        split=split, rollouts=rollouts, seed=seed, limits=Limits(timeout_s=timeout),
        max_calls=max_calls, max_tokens=max_tokens, task_ids=task,
        model_timeout_s=model_timeout,
    )  # fmt: skip
    db = ws.open_store(store)
    if router is not None:
        return _routed(ws, db, request, router, route_when, as_json=as_json)
    gate = cost_gate(ws, request, db, yes=yes, confirm_above=confirm_above)
    with rollout_progress(err_console(), events=as_json) as progress:
        result = evaluate(request, db, progress=progress, before_run=gate)
    render_eval(spec, request, result, as_json=as_json)
    if result.infra_failed:
        raise typer.Exit(3)
    if harness_broken(spec, result) or result.problems:
        raise typer.Exit(1)


def harness_broken(spec, result) -> bool:
    """Whether every rollout of the eval is a ``harness_error``; if so, say so plainly on
    stderr: the file that does not compile (compiled, never run: harness code is untrusted),
    else a rollout to look at."""
    from ..outcomes import Outcome
    from .render import err_console, escape

    rows = result.rows
    if not rows or any(r.outcome != Outcome.HARNESS_ERROR for r in rows):
        return False
    why = _syntax_error(spec.path)
    first = (rows[0].error or "").strip().splitlines()
    said = "".join(c for c in (first[-1] if first else "") if c.isprintable())[:200]
    detail = (
        f"it does not import: {why}"
        if why
        else f"its code raises ({said or 'no error text'}; see `harnessctl show {rows[0].id[:12]}`)"
    )
    err_console().print(
        f"[bold red]error:[/] every rollout ({len(rows)}) ended in harness_error: harness "
        f"{escape(spec.name)} is broken, {escape(detail)}",
        soft_wrap=True,
    )
    return True


def _syntax_error(root) -> str | None:
    """The first ``file:line: message`` of a Python file of the harness that fails to
    compile, else None."""
    for path in sorted(root.rglob("*.py")):
        try:
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        except SyntaxError as exc:
            return f"{path.relative_to(root)}:{exc.lineno}: SyntaxError: {exc.msg}"
        except (OSError, ValueError) as exc:
            return f"{path.relative_to(root)}: {exc}"
    return None


def _routed(ws, db, request, pool: str, when: str, *, as_json: bool) -> None:
    """``harnessctl eval HARNESS --router POOL``: base vs Rank-1 routed."""
    from ..profiles.candidates import pool_specs
    from ..profiles.routed import routed_eval
    from ..summary import RoutedEvalRecord
    from .progress import rollout_progress
    from .render import console, err_console, print_result
    from .route_view import render_routed

    specs = pool_specs(ws, pool_arg(pool), lineage_of=request.harness)
    with rollout_progress(err_console(), events=as_json) as progress:
        result = routed_eval(request, specs, db, progress=progress, when=when)
    if as_json:
        print_result(RoutedEvalRecord.of(request.harness.name, request.policy.id, result))
    else:
        render_routed(console(), request.harness, request, result)
