from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ..constants import (
    DEFAULT_MAX_CALLS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_POLICY,
    DEFAULT_ROLLOUTS,
    ENV_POLICY,
    ENV_SANDBOX,
    ENV_STORE_URL,
    ENV_WORKERS,
)
from .options import ExecutorOption, RayAddressOption, placement

POLICY_HELP = (
    "Any litellm model string (openai/gpt-4o-mini, anthropic/..., hosted_vllm/...). "
    "Default 'sim/dbbench': the built-in simulated DBBench agent, an offline TEST DOUBLE "
    "that knows the answers and fails in seeded ways (see docs/sim-policy.md)."
)


def eval_command(
    harness: Annotated[str, typer.Argument(help="Harness directory, or a name under harnesses/.")],
    suite: Annotated[
        str | None, typer.Option(help="Suite directory or suite.yaml (default: workspace's).")
    ] = None,
    split: Annotated[str, typer.Option(help="Split of the suite to run.")] = "dev",
    policy: Annotated[str | None, typer.Option(help=POLICY_HELP, envvar=ENV_POLICY)] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            help="Policy parameter key=value (repeatable), e.g. "
            "skill=0.8 for sim, temperature=0.7, api_base=http://...",
        ),
    ] = None,
    rollouts: Annotated[int, typer.Option(min=1, help="Rollouts (seeds) per task.")] = (
        DEFAULT_ROLLOUTS
    ),
    seed: Annotated[int, typer.Option(help="First seed; rollouts use seed..seed+N-1.")] = 0,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Parallel rollouts.", envvar=ENV_WORKERS)
    ] = None,
    sandbox: Annotated[
        str | None, typer.Option(help="Sandbox backend (local).", envvar=ENV_SANDBOX)
    ] = None,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
    timeout: Annotated[float, typer.Option(help="Wall-clock seconds per rollout.")] = 60.0,
    max_calls: Annotated[int, typer.Option(help="Model calls per rollout.")] = DEFAULT_MAX_CALLS,
    max_tokens: Annotated[
        int, typer.Option(help="Prompt+completion tokens per rollout.")
    ] = DEFAULT_MAX_TOKENS,
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Only these task ids (repeatable).")
    ] = None,
    store: Annotated[
        str | None, typer.Option(help="Store SQLAlchemy URL.", envvar=ENV_STORE_URL)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    router: Annotated[
        str | None,
        typer.Option(
            help="Rank-1 routed eval: POOL (a directory of harnesses or comma-separated "
            "names) with current profiles under this policy; each task with a failure of "
            "HARNESS re-runs under the router's first choice. See docs/profiles.md.",
        ),
    ] = None,
) -> None:
    """Evaluate a harness on a suite split: cached rollouts are served from the store, the
    rest run in sandboxes; prints success with a 95% interval, outcomes, tokens and cost."""
    from ..evaluate import EvalRequest, evaluate
    from ..harness import load_harness
    from ..policy import Policy, parse_params
    from ..sandbox import Limits
    from ..workspace import load_workspace
    from .progress import rollout_progress
    from .render import console, err_console
    from .summary_view import render_summary

    ws = load_workspace()
    spec = load_harness(resolve_harness(ws, harness))
    loaded_suite = ws.load_suite(suite)
    request = EvalRequest(
        harness=spec,
        suite=loaded_suite,
        split=split,
        policy=Policy(policy or ws.config.policy or DEFAULT_POLICY, parse_params(param or [])),
        rollouts=rollouts,
        seed=seed,
        **placement(ws, workers, sandbox, executor, ray_address),
        limits=Limits(timeout_s=timeout),
        max_calls=max_calls,
        max_tokens=max_tokens,
        task_ids=task,
    )
    db = ws.open_store(store)
    if router is not None:
        from .route_cmd import run_routed_eval

        run_routed_eval(ws, db, spec, request, router, as_json=as_json)
        return
    with rollout_progress(err_console(), enabled=not as_json) as progress:
        result = evaluate(request, db, progress=progress)
    for problem in result.problems:
        err_console().print(f"[yellow]skipped[/] {problem.file}:{problem.line}: {problem.message}")
    if as_json:
        payload = {
            "run_id": result.run_id,
            "harness": spec.name,
            "harness_hash": spec.hash,
            "policy": request.policy.id,
            "cached": result.cached,
            "executed": result.executed,
            "infra_failed": len(result.infra_failed),
            "problems": [vars(p) for p in result.problems],
            "summary": result.summary.to_dict(),
        }
        console().print_json(json.dumps(payload))
    else:
        render_summary(console(), spec, request, result)
    if result.infra_failed:
        err_console().print(
            f"[red]{len(result.infra_failed)} rollout(s) failed on "
            "infrastructure after retries; run the command again to retry.[/]"
        )
        raise typer.Exit(3)
    if result.problems:
        raise typer.Exit(1)


def resolve_harness(ws, name: str) -> Path:
    path = Path(name)
    if path.is_dir():
        return path
    candidate = ws.harnesses_dir / name
    return candidate if candidate.is_dir() else path
