"""``harnessctl bench``: the evolved pool against simpler uses of the same budget, held out."""

from __future__ import annotations

from typing import Annotated

import typer

from .options import (
    ExecutorOption,
    FreshContainerOption,
    JsonOption,
    MaxCallsOption,
    MaxTokensOption,
    ParamOption,
    PolicyOption,
    RayAddressOption,
    SandboxOption,
    StoreOption,
    SuiteOption,
    WorkersOption,
    eval_request,
    placement,
    policy_of,
)

SiblingsOption = Annotated[
    str | None,
    typer.Option(
        help="Comma-separated sibling names (default: every harness of BASE's lineage under "
        "harnesses/, BASE left out)."
    ),
]
ExtraOption = Annotated[
    str | None,
    typer.Option(help="Comma-separated extra harnesses, each run alone as one more arm."),
]
CombinedOption = Annotated[
    bool,
    typer.Option(
        "--combined/--no-combined",
        help="Merge every sibling's change into one harness (git's three-way merge; "
        "conflicting siblings left out and named) and run it as an arm.",
    ),
]


def bench_command(
    base: Annotated[str, typer.Argument(help="The base harness (name under harnesses/).")],
    siblings: SiblingsOption = None,
    extra: ExtraOption = None,
    combined: CombinedOption = True,
    evidence_split: Annotated[
        str, typer.Option(help="Split whose profiles are the training evidence.")
    ] = "train",
    split: Annotated[str, typer.Option(help="Held-out split the arms are compared on.")] = "test",
    attempts: Annotated[
        int, typer.Option(min=1, help="Rollouts per pair the verifier arms may spend.")
    ] = 2,
    rollouts: Annotated[int, typer.Option(min=1, help="Seeds per held-out task.")] = 2,
    suite: SuiteOption = None,
    policy: PolicyOption = None,
    param: ParamOption = None,
    workers: WorkersOption = None,
    sandbox: SandboxOption = None,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
    fresh_container: FreshContainerOption = False,
    max_calls: MaxCallsOption = None,
    max_tokens: MaxTokensOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Equal-budget baselines on held-out tasks: the base, each sibling, the best sibling
    by training evidence, the router's Rank-1 chosen before any rollout, a random sibling,
    all repairs combined in one harness (one rollout per pair, no verifier), and best-of-N
    / retry / router arms that read the scorer's verdict (marked verifier), with model
    calls counted and paired sign tests."""
    from ..baselines import run_baselines
    from ..workspace import load_workspace
    from .bench_view import render_baselines
    from .progress import rollout_progress
    from .render import err_console

    ws = load_workspace()
    spec = ws.load_harness(base)
    chosen = _siblings(ws, spec, siblings)
    more = [ws.load_harness(n) for n in (extra or "").split(",") if n.strip()]
    pol = policy_of(ws, policy, param, spec.manifest.env)
    where = placement(ws, workers, sandbox, executor, ray_address, fresh_container)
    budgets = dict(max_calls=max_calls, max_tokens=max_tokens)
    template = eval_request(ws, spec, suite, pol, where, split=split, rollouts=rollouts, **budgets)
    with rollout_progress(err_console(), events=as_json) as progress:
        result = run_baselines(
            ws.open_store(store), template, base=spec, siblings=chosen, extra=more,
            evidence_split=evidence_split, heldout_split=split, attempts=attempts,
            combined_dir=ws.state_dir / "combined" if combined else None, progress=progress,
        )  # fmt: skip
    render_baselines(result, as_json=as_json)


def _siblings(ws, spec, names: str | None) -> list:
    """The siblings named, or every harness of the base's lineage but the base and root."""
    from ..harness import lineage_root
    from ..profiles.candidates import pool_specs

    if names:
        chosen = [ws.load_harness(n) for n in names.split(",") if n.strip()]
    else:
        lineage = pool_specs(ws, ws.harnesses_dir, lineage_of=spec)
        root = lineage_root(spec, ws.harnesses_dir).name
        chosen = [s for s in lineage if s.name not in (spec.name, root)]
    if not chosen:
        raise typer.BadParameter(f"{spec.name} has no siblings under harnesses/ (run evolve first)")
    return chosen
