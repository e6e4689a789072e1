from __future__ import annotations

import json
from typing import Annotated

import typer

from ..constants import ENV_POLICY, ENV_SANDBOX, ENV_STORE_URL, ENV_WORKERS
from .eval_cmd import POLICY_HELP, resolve_harness
from .options import ExecutorOption, RayAddressOption, placement

EDITOR_HELP = (
    "'rules' (default): the offline RULE-BASED editor, a catalogue of known code repairs for "
    "the DBBench base harness (a test double, not a model); or any litellm model string, "
    "which answers with SEARCH/REPLACE blocks."
)


def evolve_command(
    base: Annotated[str, typer.Argument(help="Base harness directory or name under harnesses/.")],
    suite: Annotated[str | None, typer.Option(help="Suite directory (default: workspace's).")] = (
        None
    ),
    split: Annotated[str, typer.Option(help="Split the edits are judged on.")] = "train",
    directions: Annotated[
        str | None, typer.Option(help="Comma-separated direction names (default: all).")
    ] = None,
    rounds: Annotated[int, typer.Option(min=1, help="Rounds per direction.")] = 2,
    editor: Annotated[str, typer.Option(help=EDITOR_HELP)] = "rules",
    editor_param: Annotated[
        list[str] | None, typer.Option("--editor-param", help="Editor model key=value.")
    ] = None,
    policy: Annotated[str | None, typer.Option(help=POLICY_HELP, envvar=ENV_POLICY)] = None,
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="Policy k=v.")] = None,
    rollouts: Annotated[int, typer.Option(min=1, help="Seeds per task for the parent.")] = 2,
    batch: Annotated[int, typer.Option(help="Failures per edit (same-batch rescues).")] = 12,
    control: Annotated[int, typer.Option(help="Parent successes re-run (regressions).")] = 12,
    alpha: Annotated[float, typer.Option(help="Sign-test level for accepting an edit.")] = 0.1,
    min_net: Annotated[int, typer.Option(help="Rescues minus regressions at least.")] = 1,
    editor_retries: Annotated[int, typer.Option(help="Retries after a rejected patch.")] = 2,
    max_edits: Annotated[int | None, typer.Option(help="Stop after this many edits.")] = None,
    max_editor_cost: Annotated[
        float | None, typer.Option(help="Stop when editor cost (USD) reaches this.")
    ] = None,
    workers: Annotated[int | None, typer.Option(min=1, envvar=ENV_WORKERS)] = None,
    sandbox: Annotated[str | None, typer.Option(envvar=ENV_SANDBOX)] = None,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
    timeout: Annotated[float, typer.Option(help="Wall-clock seconds per rollout.")] = 60.0,
    store: Annotated[str | None, typer.Option(envvar=ENV_STORE_URL)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Grow sibling harnesses from BASE along repair directions: each round an editor
    proposes a patch, it is validated, judged by a same-batch paired re-run (rescues vs
    regressions), and an accepted child is committed as harnesses/<base>.<direction>.rN."""
    from ..evaluate import EvalRequest
    from ..evolve.directions import catalogue, select
    from ..evolve.editors import make_editor
    from ..evolve.engine import Engine, EvolveRequest
    from ..harness import load_harness
    from ..policy import Policy, parse_params
    from ..sandbox import Limits
    from ..workspace import load_workspace
    from .evolve_view import render_evolve
    from .progress import rollout_progress
    from .render import console, err_console

    ws = load_workspace()
    spec = load_harness(resolve_harness(ws, base))
    loaded = ws.load_suite(suite)
    chosen = select(
        directions.split(",") if directions else None, catalogue(spec.manifest.env, ws.root)
    )
    eval_request = EvalRequest(
        harness=spec,
        suite=loaded,
        split=split,
        policy=Policy(policy or ws.config.policy, parse_params(param or [])),
        rollouts=rollouts,
        **placement(ws, workers, sandbox, executor, ray_address),
        limits=Limits(timeout_s=timeout),
    )
    request = EvolveRequest(
        base=spec,
        eval=eval_request,
        directions=chosen,
        editor=make_editor(
            editor,
            workspace=ws.root,
            family=spec.manifest.env,
            params=parse_params(editor_param or []),
        ),
        rounds=rounds,
        batch_size=batch,
        control_size=control,
        alpha=alpha,
        min_net=min_net,
        editor_retries=editor_retries,
        max_edits=max_edits,
        max_editor_cost=max_editor_cost,
    )

    def log(direction: str, message: str) -> None:
        if not as_json:
            err_console().print(f"[bold cyan]{direction}[/] {message}")

    with rollout_progress(err_console(), enabled=not as_json) as progress:
        result = Engine(request, ws, ws.open_store(store), log=log, progress=progress).run()
    if as_json:
        console().print_json(
            json.dumps(
                {
                    "evolve_id": result.evolve_id,
                    "base_success": result.base_success,
                    "union_rescues": result.union_rescues,
                    "stopped": result.stopped,
                    "variants": [
                        {k: v for k, v in vars(x).items() if k != "rescued_pairs"}
                        for x in result.variants
                    ],
                    "best": {
                        d: {
                            "name": v.name,
                            "rescues": v.rescues,
                            "regressions": v.regressions,
                            "success_rate": v.success_rate,
                        }
                        for d, v in result.best.items()
                    },
                    "edits": [
                        {
                            "id": e.id,
                            "direction": e.direction,
                            "round": e.round,
                            "attempt": e.attempt,
                            "status": e.status,
                            "reason": e.reason,
                            "rescues": e.rescues,
                            "regressions": e.regressions,
                            "reward": e.reward,
                        }
                        for e in result.edits
                    ],
                }
            )
        )
    else:
        render_evolve(console(), spec, result)
