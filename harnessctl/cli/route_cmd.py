"""``harnessctl route``: rank a pool of harnesses for a failed task (profiles + voters)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..constants import ENV_STORE_URL
from .render import pct


def parse_pool(ws, pool: str) -> list:
    """POOL: a directory of harness directories, or comma-separated names/directories."""
    from ..harness import MANIFEST, load_harness
    from .eval_cmd import resolve_harness

    path = Path(pool)
    if path.is_dir() and not (path / MANIFEST).is_file():
        return [load_harness(p) for p in sorted(path.iterdir()) if (p / MANIFEST).is_file()]
    names = [n.strip() for n in pool.split(",") if n.strip()]
    if not names:
        raise typer.BadParameter("POOL names no harness")
    return [load_harness(resolve_harness(ws, n)) for n in names]


def route_command(
    task: Annotated[str, typer.Option("--task", help="The failed task's id.")],
    failures: Annotated[
        str, typer.Option(help="Comma-separated ids (or unique prefixes) of its failed rollouts.")
    ],
    k: Annotated[int, typer.Option("--k", min=1, help="How many harnesses to return.")] = 3,
    pool: Annotated[
        str | None,
        typer.Option(
            help="Candidates: a directory of harnesses or comma-separated names "
            "(default: every harness with a current profile under the rollouts' policy)."
        ),
    ] = None,
    voter: Annotated[
        list[str] | None,
        typer.Option("--voter", help="LLM voter: any litellm model string (repeatable)."),
    ] = None,
    voter_param: Annotated[
        list[str] | None,
        typer.Option("--voter-param", help="key=value for every voter (api_base=...)."),
    ] = None,
    voter_timeout: Annotated[float, typer.Option(help="Seconds per voter call.")] = 30.0,
    store: Annotated[
        str | None, typer.Option(help="Store SQLAlchemy URL.", envvar=ENV_STORE_URL)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Rank the pool for a failed task: smoothed rescue rates from the behavior profiles
    (task category, failure outcomes), optionally Borda-combined with LLM votes."""
    from ..errors import HarnessctlError
    from ..evolve.digest import digest
    from ..harness import load_harness
    from ..policy import parse_params
    from ..profiles.router import route
    from ..profiles.runner import load_profiles
    from ..profiles.voting import Voter
    from ..workspace import load_workspace
    from .render import console

    ws = load_workspace()
    db = ws.open_store(store)
    rows = [db.rollout(i) for i in failures.split(",") if i.strip()]
    if not rows:
        raise typer.BadParameter("--failures names no rollout")
    for row in rows:
        if row.task_id != task:
            raise HarnessctlError(f"rollout {row.id} is of task {row.task_id}, not {task}")
        if row.success:
            raise HarnessctlError(f"rollout {row.id} succeeded: route failed rollouts only")
    policy_id, suite = rows[0].policy_id, rows[0].suite
    failed_hashes = {r.harness_hash for r in rows}
    if pool:
        specs = parse_pool(ws, pool)
    else:
        by_hash = {p.harness_hash: p for p in db.profiles(policy_id=policy_id, suite=suite)}
        specs = []
        for h, p in sorted(by_hash.items(), key=lambda kv: kv[1].harness_name):
            path = ws.harnesses_dir / p.harness_name
            if (path / "harness.yaml").is_file():
                spec = load_harness(path)
                if spec.hash == h:
                    specs.append(spec)
    specs = [s for s in specs if s.hash not in failed_hashes]
    if not specs:
        raise HarnessctlError(f"no candidate harness with a profile under {policy_id}")
    profiles = load_profiles(db, specs, policy_id=policy_id, suite=suite, avoid_split=rows[0].split)
    params = parse_params(voter_param or [])
    voters = [Voter(m, params, voter_timeout) for m in voter or []]
    digests = [digest(r, db.trajectory(r)).render() for r in rows]
    result = route(
        profiles,
        task_id=task,
        category=rows[0].category,
        failure_outcomes=[r.outcome for r in rows],
        k=k,
        voters=voters,
        digests=digests,
    )
    if as_json:
        console().print_json(json.dumps(result.to_dict()))
    else:
        render_route(console(), result)


def render_route(console: Console, result) -> None:
    console.print(
        f"task {result.task_id} ({result.category}), failures: "
        + ", ".join(result.failure_outcomes)
    )
    table = Table(title=f"top {result.k}", show_edge=False)
    for col in ("rank", "harness", "score", "profile", "reasons"):
        table.add_column(col, overflow="fold")
    for i, c in enumerate(result.top, 1):
        table.add_row(
            str(i), c.name, f"{c.score:g}", f"{c.profile_score:.3f}", "; ".join(c.reasons)
        )
    console.print(table)
    for v in result.votes:
        status = "ok: " + ", ".join(v.ranking) if v.ok else f"ignored ({v.error})"
        console.print(f"voter {v.model}: {status}")


def render_routed(console: Console, spec, request, result) -> None:
    b, r = result.base, result.routed
    console.print(
        f"[bold]Rank-1 routed eval[/] of {spec.name} on {request.suite.name}/{request.split}, "
        f"{result.rollouts} rollouts per task on both sides"
    )
    table = Table(show_edge=False)
    for col in ("", "success", "95% CI", "successes"):
        table.add_column(col)
    for label, s in (("base", b), ("routed", r)):
        table.add_row(
            label,
            pct(s.success_rate),
            f"{pct(s.ci95[0])}-{pct(s.ci95[1])}",
            f"{s.successes}/{s.rollouts}",
        )
    console.print(table)
    d = result.to_dict()
    console.print(
        f"delta {100 * d['delta']:+.1f} pts; {d['routed_tasks']} task(s) routed: "
        + ", ".join(f"{n} x{c}" for n, c in d["chosen_counts"].items())
    )


def run_routed_eval(ws, db, spec, request, pool: str, *, as_json: bool) -> None:
    """``harnessctl eval HARNESS --router POOL``: base vs Rank-1 routed, same rollouts."""
    from ..profiles.routed import routed_eval
    from .progress import rollout_progress
    from .render import console, err_console

    specs = parse_pool(ws, pool)
    with rollout_progress(err_console(), enabled=not as_json) as progress:
        result = routed_eval(request, specs, db, progress=progress)
    if as_json:
        payload = {"harness": spec.name, "policy": request.policy.id, **result.to_dict()}
        console().print_json(json.dumps(payload))
    else:
        render_routed(console(), spec, request, result)
