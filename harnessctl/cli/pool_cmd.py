from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .options import JsonOption, ParamOption, PolicyOption, SandboxOption, StoreOption, policy_of
from .render import handle_errors

pool_app = typer.Typer(
    help="Inspect and check exported harness pools.", no_args_is_help=True, rich_markup_mode=None
)


SPLIT_HELP = (
    "Freeze the profiles of this split (default: each harness's newest, full profiles "
    "first); what was frozen is printed, and the pool id covers it."
)


def export_pool_command(
    harnesses: Annotated[
        list[str] | None,
        typer.Argument(help="Harnesses to include (default: every harness with a profile)."),
    ] = None,
    name: Annotated[str, typer.Option(help="Pool name.")] = "pool",
    out: Annotated[Path, typer.Option(help="Output directory (also writes OUT.tar.gz).")] = Path(
        "pool"
    ),
    base: Annotated[
        str | None,
        typer.Option(help="The base harness (role base; default: the root of the lineage)."),
    ] = None,
    suite: Annotated[str | None, typer.Option(help="Suite the profiles are on.")] = None,
    split: Annotated[str | None, typer.Option(help=SPLIT_HELP)] = None,
    policy: PolicyOption = None,
    param: ParamOption = None,
    include_unreproduced: Annotated[
        bool,
        typer.Option(
            "--include-unreproduced",
            help="Keep siblings whose claimed rescues reproduce no better than their parent "
            "tried again (left out by default; each is named).",
        ),
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Freeze the base and its siblings into a verifiable pool: harness trees, profiles,
    manifest (pool id, hashes, git commits, roles, router config, each sibling's reproduction)
    and SHA256SUMS, plus a single-file archive. Refuses harnesses with uncommitted changes.
    Leaves out siblings whose rescues do not reproduce (named) unless --include-unreproduced.
    Prints the split and size of each profile it froze."""
    from ..pool.export import check_committed, export_pool
    from ..profiles.runner import edit_reproductions, load_profiles
    from ..workspace import load_workspace

    ws = load_workspace()
    loaded = ws.load_suite(suite)
    pol = policy_of(ws, policy, param, loaded.config.env)
    db = ws.open_store(store)
    specs = _profiled(ws, db, harnesses, pol.id, loaded.name)
    base_spec = _base(ws, base, specs, harnesses, suite)
    aux = [s for s in specs if s.hash != base_spec.hash]
    reproductions = edit_reproductions(db, aux)
    aux, left_out = _reproducible(specs, aux, reproductions, include_unreproduced)
    check_committed(ws.root, [base_spec, *aux])  # before profiles: name the real problem
    profiles = load_profiles(
        db, [base_spec, *aux], policy_id=pol.id, suite=loaded.name, split=split
    )
    path = export_pool(
        name=name, harnesses=aux, base=base_spec, profiles=profiles, out=out.resolve(),
        repo_root=ws.root, policy_id=pol.id, suite=loaded.name, reproductions=reproductions,
    )  # fmt: skip
    render_exported(path, as_json=as_json, profiles=profiles, left_out=left_out)


def _base(ws, base: str | None, specs: list, harnesses: list[str] | None, suite: str | None):
    """The pool's base harness; without --suite, a pool of several environments is named
    first (the real cause of an unresolved base)."""
    from ..errors import ConfigError

    try:
        return ws.base_harness(base, [s.name for s in specs])
    except ConfigError:
        if suite is None:
            _one_environment(ws, harnesses)
        raise


def _reproducible(specs: list, aux: list, reproductions: dict, include: bool):
    """The siblings whose rescues reproduce (all with ``include``) and those left out, by
    name with why; none left of several: an error naming each."""
    from ..errors import HarnessctlError
    from ..pool.export import reproducible

    aux, left_out = reproducible(aux, reproductions, include=include)
    if specs and not aux and left_out:
        raise HarnessctlError(
            "no sibling left for the pool: "
            + "; ".join(f"{n}: {why}" for n, why in left_out.items())
            + " (--include-unreproduced keeps them)"
        )
    return aux, left_out


def _profiled(ws, db, harnesses: list[str] | None, policy_id: str, suite: str) -> list:
    """The harnesses named, or every harness of the workspace with a profile."""
    if harnesses:
        return [ws.load_harness(h) for h in harnesses]
    return [
        spec
        for spec in ws.harnesses()
        if db.profiles(harness_hash=spec.hash, policy_id=policy_id, suite=suite)
    ]


def _one_environment(ws, harnesses: list[str] | None) -> None:
    """Without --suite, when no base could be chosen: the harnesses (given, else the
    workspace's) of several environments mean --suite is what is missing (the default suite
    is one environment's; --base alone was blamed before)."""
    from ..errors import ConfigError

    specs = [ws.load_harness(h) for h in harnesses] if harnesses else ws.harnesses()
    kinds = sorted({s.manifest.env for s in specs})
    if len(kinds) > 1:
        raise ConfigError(
            "--suite",
            f"--suite is missing: the harnesses here are of several environments "
            f"({', '.join(kinds)}); pass --suite for the one whose pool to export",
        )


def render_exported(
    path: Path, *, as_json: bool, profiles: dict | None = None, left_out: dict | None = None
) -> None:
    """What ``export-pool`` prints about the pool it wrote at ``path``, with the split of
    each profile it froze (``profiles``: name -> Profile) and the siblings it left out
    (``left_out``: name -> why)."""
    from .render import console, escape, pct

    manifest = json.loads((path / "pool.json").read_text())
    profiles = profiles or {}
    if as_json:
        from ..results import ExportPoolResult
        from .render import print_result

        names = [h["name"] for h in manifest["harnesses"]]
        archive = str(path.parent / f"{path.name}.tar.gz")
        print_result(
            ExportPoolResult(
                pool_id=manifest["pool_id"],
                path=str(path),
                archive=archive,
                harnesses=names,
                profile_splits={n: p.split for n, p in profiles.items()},
                left_out=left_out or {},
            )
        )
        return
    out = console()
    out.print(
        f"pool [bold]{escape(manifest['pool_id'])}[/] with {len(manifest['harnesses'])} "
        f"harnesses at {escape(str(path))} (+ {escape(path.name)}.tar.gz)"
    )
    for name, p in profiles.items():
        out.print(
            f"  froze {escape(name)}: {p.kind} profile on {escape(p.suite.name)}/"
            f"{escape(p.split)}, {p.tasks} tasks x {len(p.seeds)} seeds, "
            f"success {pct(p.success.rate)}"
        )
    for name, why in (left_out or {}).items():
        out.print(
            f"  left out {escape(name)}: {escape(why)} (--include-unreproduced keeps it)",
            soft_wrap=True,
        )


def verify_command(
    directory: Annotated[Path, typer.Argument(help="Exported pool directory.")],
    as_json: JsonOption = False,
) -> None:
    """Check every checksum and harness hash of an exported pool, each frozen profile
    against pool.json, and that the pool id is the id of what it freezes (its trees and its
    profiles' splits and content); names any tampered file (exit 1)."""
    from ..pool import Pool, verify_pool
    from ..pool.identity import covers_profiles
    from ..results import VerifyResult
    from .render import console, err_console, escape, print_result

    problems = verify_pool(directory)
    if problems:
        for problem in problems:
            err_console().print(f"[red]{escape(str(problem))}[/]", soft_wrap=True)
        if as_json:
            print_result(VerifyResult(path=str(directory), ok=False, problems=problems))
        raise typer.Exit(1)
    pool = Pool.load(directory)  # also checks each tree's content hash against pool.json
    if as_json:
        n = len(pool.names)
        print_result(VerifyResult(path=str(directory), ok=True, pool_id=pool.id, harnesses=n))
        return
    console().print(escape(f"pool {pool.id}: {len(pool.names)} harnesses, all checksums match"))
    if not covers_profiles(pool.manifest):  # readable, but its id predates issue #56
        console().print(
            escape(
                "its id covers the harness trees, not the profiles (an older pool format; "
                "the checksums cover them): export it again for an id that does"
            ),
            soft_wrap=True,
        )


def rescue_sim_command(
    pool_dir: Annotated[Path, typer.Argument(help="Exported pool directory.")],
    suite: Annotated[str | None, typer.Option(help="Suite directory.")] = None,
    split: Annotated[str, typer.Option(help="Split to simulate on.")] = "test",
    policy: PolicyOption = None,
    param: ParamOption = None,
    group_size: Annotated[int, typer.Option(min=1, help="Rollouts per group (GRPO group).")] = 4,
    k: Annotated[int, typer.Option(min=1, help="Siblings to route an all-fail group to.")] = 2,
    seed: Annotated[int, typer.Option(min=0, help="First seed.")] = 0,
    sandbox: SandboxOption = "local",
    as_json: JsonOption = False,
) -> None:
    """Run the rescue rule over a suite: how many all-fail groups were rescued, by which
    harness, at what extra rollout cost. Each task's result is cached in the workspace
    (.harnessctl/rescue-sim/): a rerun recomputes nothing, an interrupted one resumes."""
    from ..pool import Pool
    from ..pool.simulate import TaskCache, simulate
    from ..workspace import load_workspace
    from .progress import rollout_progress
    from .render import console, err_console, escape, print_result

    ws = load_workspace()
    loaded = ws.load_suite(suite)
    pol = policy_of(ws, policy, param, loaded.config.env)
    cache = TaskCache(ws.state_dir / "rescue-sim")
    with (
        Pool.load(pool_dir, sandbox=sandbox) as pool,
        rollout_progress(err_console(), what="tasks", events=as_json) as progress,
    ):
        _warn_in_sample(pool, loaded, split)
        report = simulate(
            pool, loaded.tasks(split).tasks, pol, group_size=group_size, k=k, seed=seed,
            cache=cache, progress=progress,
        )  # fmt: skip
    if as_json:
        print_result(report)
        return
    console().print(
        f"{report.groups} groups of {group_size}: {report.all_fail} all-fail under the "
        f"base, {report.rescued} rescued ({report.extra_rollouts} extra rollouts)"
    )
    for harness, n in sorted(report.by_harness.items(), key=lambda kv: -kv[1]):
        console().print(f"  {escape(harness)}: {n} successful rollout(s) in all-fail groups")


def _warn_in_sample(pool, suite, split: str) -> None:
    """Say so when the pool's routing evidence (its profiles) came from the split being
    simulated: the rescues it then shows are in-sample."""
    from .render import err_console, escape

    seen = sorted(
        name
        for name, p in pool.profiles().items()
        if p.split == split and p.suite.name == suite.name
    )
    if seen:
        err_console().print(
            f"[yellow]IN-SAMPLE:[/] the pool's profiles of {escape(', '.join(seen))} were "
            f"built on {escape(suite.name)}/{escape(split)}, the split simulated here: the "
            "router saw these tasks (export a pool of profiles on another split for a "
            "held-out figure)"
        )


pool_app.command("verify")(handle_errors(verify_command))
