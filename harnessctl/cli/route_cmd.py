"""``harnessctl route``: rank a pool of harnesses for a failed task (profiles + voters)."""

from __future__ import annotations

from typing import Annotated

import typer

from .options import JsonOption, StoreOption, pool_arg, positive

PoolOption = Annotated[
    str | None,
    typer.Option(
        help="Candidates: a directory of harnesses or comma-separated names "
        "(default: every harness with a current profile under the rollouts' policy)."
    ),
]
VoterOption = Annotated[
    list[str] | None,
    typer.Option("--voter", help="LLM voter: any litellm model string (repeatable)."),
]
VoterParamOption = Annotated[
    list[str] | None,
    typer.Option("--voter-param", help="key=value for every voter (api_base=...)."),
]
FailuresOption = Annotated[
    str, typer.Option(help="Comma-separated ids (or unique prefixes) of its failed rollouts.")
]
SplitOption = Annotated[
    str | None,
    typer.Option(
        help="Rank by the profiles of this split (default: the split `eval --router` reads "
        "for these tasks: one every candidate has, other than the failures' split, train "
        "first); the output names the split and the harnesses read."
    ),
]


def route_command(
    task: Annotated[str, typer.Option("--task", help="The failed task's id.")],
    failures: FailuresOption,
    k: Annotated[int, typer.Option("--k", min=1, help="How many harnesses to return.")] = 3,
    pool: PoolOption = None,
    split: SplitOption = None,
    voter: VoterOption = None,
    voter_param: VoterParamOption = None,
    voter_timeout: Annotated[
        float, typer.Option(callback=positive, help="Seconds per voter call.")
    ] = 30.0,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Rank the pool for a failed task: smoothed rescue rates from the behavior profiles
    (task category, failure outcomes), optionally Borda-combined with LLM votes. Says which
    profiles it read (split, harnesses); `eval --router` reads the same by default."""
    from ..policy import parse_params
    from ..profiles.candidates import route_failures
    from ..profiles.voting import Voter
    from ..workspace import load_workspace
    from .render import console, print_result
    from .route_view import render_route

    ws = load_workspace()
    db = ws.open_store(store)
    ids = [i for i in failures.split(",") if i.strip()]
    if not ids:
        raise typer.BadParameter("--failures names no rollout")
    params = parse_params(voter_param or [])
    voters = [Voter(m, params, voter_timeout) for m in voter or []]
    if voters:  # a voter that cannot answer (no key, server down) is a usage error
        from ..gateway.preflight import preflight

        for v in voters:
            preflight(v.model, dict(v.params), option="--voter")
    candidates = pool_arg(pool) if pool else None
    result = route_failures(ws, db, task, ids, pool=candidates, k=k, voters=voters, split=split)
    if as_json:
        from ..results import RouteRecord

        print_result(RouteRecord(**result.to_dict()))
    else:
        render_route(console(), result)
