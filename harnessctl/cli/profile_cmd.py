"""``harnessctl profile``: behavior profiles, the rescue matrix, and re-anchoring."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..constants import DEFAULT_POLICY, ENV_POLICY, ENV_SANDBOX, ENV_STORE_URL, ENV_WORKERS
from .eval_cmd import POLICY_HELP, resolve_harness
from .options import ExecutorOption, RayAddressOption, placement
from .render import pct


def load_suite_arg(ws, suite: str | None):
    """The suite named by --suite, or the workspace's."""

    return ws.load_suite(suite)


def profile_command(
    harnesses: Annotated[
        list[str], typer.Argument(help="Harness directories or names under harnesses/.")
    ],
    suite: Annotated[str | None, typer.Option(help="Suite directory (default: workspace's).")] = (
        None
    ),
    split: Annotated[str, typer.Option(help="Split the profiles are built on.")] = "train",
    policy: Annotated[str | None, typer.Option(help=POLICY_HELP, envvar=ENV_POLICY)] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="Policy parameter key=value (repeatable)."),
    ] = None,
    rollouts: Annotated[int, typer.Option(min=1, help="Rollouts (seeds) per task.")] = 2,
    seed: Annotated[int, typer.Option(help="First seed.")] = 0,
    base: Annotated[
        str | None,
        typer.Option(help="Base harness for rescue sets (default: root of the lineage)."),
    ] = None,
    reanchor: Annotated[
        bool,
        typer.Option(
            "--reanchor",
            help="Re-run a seeded, category-stratified sample under this policy, report "
            "drift against the anchor policy and refresh the profiles.",
        ),
    ] = False,
    anchor_policy: Annotated[
        str | None, typer.Option(help="Anchor policy model (default: newest other profile's).")
    ] = None,
    anchor_param: Annotated[
        list[str] | None, typer.Option("--anchor-param", help="Anchor policy key=value.")
    ] = None,
    per_category: Annotated[
        int, typer.Option(min=1, help="Re-anchoring sample: tasks per category.")
    ] = 2,
    sample_seed: Annotated[int, typer.Option(help="Re-anchoring sample seed.")] = 0,
    out: Annotated[
        Path | None, typer.Option(help="Where YAML goes (default: the workspace's profiles/).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Parallel rollouts.", envvar=ENV_WORKERS)
    ] = None,
    sandbox: Annotated[str | None, typer.Option(help="Sandbox backend.", envvar=ENV_SANDBOX)] = (
        None
    ),
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
    store: Annotated[
        str | None, typer.Option(help="Store SQLAlchemy URL.", envvar=ENV_STORE_URL)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Profile harnesses (cached evaluation): success with a 95% interval, per category,
    outcomes, cost percentiles, the rescue set against the base, a behavior card, and the
    pool's rescue matrix; stored, and written as YAML under profiles/."""
    from ..evaluate import EvalRequest
    from ..harness import load_harness
    from ..policy import Policy, parse_params
    from ..profiles.reanchor import reanchor as do_reanchor
    from ..profiles.runner import lineage_root, profile_pool
    from ..workspace import load_workspace
    from .progress import rollout_progress
    from .render import console, err_console

    ws = load_workspace()
    specs = [load_harness(resolve_harness(ws, h)) for h in harnesses]
    base_spec = (
        load_harness(resolve_harness(ws, base))
        if base
        else lineage_root(specs[0], ws.harnesses_dir)
    )
    template = EvalRequest(
        harness=base_spec,
        suite=load_suite_arg(ws, suite),
        split=split,
        policy=Policy(policy or ws.config.policy or DEFAULT_POLICY, parse_params(param or [])),
        rollouts=rollouts,
        seed=seed,
        **placement(ws, workers, sandbox, executor, ray_address),
        command="profile",
    )
    db = ws.open_store(store)
    out_dir = out or ws.root / "profiles"
    drift = None
    with rollout_progress(err_console(), enabled=not as_json) as progress:
        if reanchor:
            anchor = (
                Policy(anchor_policy, parse_params(anchor_param or [])) if anchor_policy else None
            )
            result = do_reanchor(
                specs,
                base_spec,
                template,
                db,
                anchor_policy=anchor,
                per_category=per_category,
                sample_seed=sample_seed,
                out_dir=out_dir,
                progress=progress,
            )
            pool, drift = result.profiles, result
        else:
            pool = profile_pool(specs, base_spec, template, db, out_dir=out_dir, progress=progress)
    if as_json:
        payload = {
            "base": pool.base,
            "policy": template.policy.id,
            "profiles": pool.profiles,
            "profile_ids": pool.profile_ids,
            "matrix": pool.matrix,
            "paths": [str(p) for p in pool.paths],
        }
        if drift is not None:
            payload["reanchor"] = {
                "anchor_policy": drift.anchor_policy,
                "policy": drift.policy,
                "sample": drift.sample,
                "drift": [d.to_dict() for d in drift.drift],
            }
        console().print_json(json.dumps(payload))
        return
    render_pool(console(), pool, template.policy.id)
    if drift is not None:
        render_drift(console(), drift)


def render_pool(console: Console, pool, policy_id: str) -> None:
    table = Table(title=f"behavior profiles ({policy_id}), base {pool.base}", show_edge=False)
    for col in ("harness", "success", "95% CI", "rescues", "tokens p50", "card"):
        table.add_column(col, overflow="fold")
    for name in sorted(pool.profiles):
        p = pool.profiles[name]
        lo, hi = p["success"]["ci95"]
        rescue = p["rescue"]
        table.add_row(
            name,
            pct(p["success"]["rate"]),
            f"{pct(lo)}-{pct(hi)}",
            "-" if name == pool.base else f"{rescue['count']}/{rescue['opportunities']}",
            f"{p['tokens']['p50']:.0f}",
            p["card"]["summary"],
        )
    console.print(table)
    m = pool.matrix
    if m["harnesses"]:
        grid = Table(title="rescue matrix (shared rescued tasks)", show_edge=False)
        grid.add_column("harness")
        for i, _ in enumerate(m["harnesses"]):
            grid.add_column(f"#{i + 1}", justify="right")
        grid.add_column("unique", justify="right")
        for i, a in enumerate(m["harnesses"]):
            cells = [str(m["overlap"][a][b]) for b in m["harnesses"]]
            grid.add_row(f"#{i + 1} {a}", *cells, str(len(m["unique"][a])))
        console.print(grid)
        console.print(
            f"union of rescues: {m['union_size']} tasks; largest single: {m['largest_single']}"
        )
    for path in pool.paths:
        console.print(f"wrote {path}")


def render_drift(console: Console, result) -> None:
    console.print(
        f"re-anchored {result.anchor_policy} -> {result.policy} on {len(result.sample)} tasks"
    )
    table = Table(title="drift (new - old, 95% Newcombe interval)", show_edge=False)
    for col in ("harness", "success old", "success new", "delta", "rescue delta", "drifted"):
        table.add_column(col)
    for d in result.drift:
        so, sn = d.success_old, d.success_new
        delta, lo, hi = d.success_delta
        rescue = "-"
        if d.rescue_delta is not None:
            rd, rlo, rhi = d.rescue_delta
            rescue = f"{100 * rd:+.1f} [{100 * rlo:+.1f}, {100 * rhi:+.1f}]"
        table.add_row(
            d.harness,
            f"{so[0]}/{so[1]}",
            f"{sn[0]}/{sn[1]}",
            f"{100 * delta:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]",
            rescue,
            "yes" if d.drifted else "no",
        )
    console.print(table)
