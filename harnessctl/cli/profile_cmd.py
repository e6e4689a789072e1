"""``harnessctl profile``: behavior profiles, the rescue matrix, and re-anchoring."""

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
    RolloutsOption,
    SandboxOption,
    StoreOption,
    SuiteOption,
    WorkersOption,
    eval_request,
    placement,
    policy_of,
)

HarnessesArg = Annotated[
    list[str], typer.Argument(help="Harness directories or names under harnesses/.")
]
SplitOption = Annotated[str, typer.Option(help="Split the profiles are built on.")]
BaseOption = Annotated[
    str | None, typer.Option(help="Base harness for rescue sets (default: root of the lineage).")
]
ReanchorOption = Annotated[
    bool,
    typer.Option(
        "--reanchor",
        help="Re-run a seeded, category-stratified sample under this policy, report "
        "drift against the anchor policy and refresh the profiles.",
    ),
]
AnchorPolicyOption = Annotated[
    str | None, typer.Option(help="Anchor policy model (default: newest other profile's).")
]
AnchorParamOption = Annotated[
    list[str] | None, typer.Option("--anchor-param", help="Anchor policy key=value.")
]
PerCategoryOption = Annotated[
    int, typer.Option(min=1, help="Re-anchoring sample: tasks per category.")
]
SampleSeedOption = Annotated[int, typer.Option(min=0, help="Re-anchoring sample seed.")]
OutOption = Annotated[
    Path | None, typer.Option(help="Where YAML goes (default: the workspace's profiles/).")
]


def profile_command(
    harnesses: HarnessesArg,
    suite: SuiteOption = None,
    split: SplitOption = "train",
    policy: PolicyOption = None,
    param: ParamOption = None,
    rollouts: RolloutsOption = 2,
    seed: Annotated[int, typer.Option(min=0, help="First seed.")] = 0,
    base: BaseOption = None,
    reanchor: ReanchorOption = False,
    anchor_policy: AnchorPolicyOption = None,
    anchor_param: AnchorParamOption = None,
    per_category: PerCategoryOption = 2,
    sample_seed: SampleSeedOption = 0,
    out: OutOption = None,
    workers: WorkersOption = None,
    sandbox: SandboxOption = None,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
    fresh_container: FreshContainerOption = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Profile harnesses (cached evaluation): success with a 95% interval, per category,
    outcomes, cost percentiles, the rescue set against the base, a behavior card, and the
    pool's rescue matrix; stored, and written as YAML under profiles/."""
    from ..harness import lineage_root
    from ..profiles.reanchor import reanchor as refresh
    from ..profiles.runner import profile_pool
    from ..workspace import load_workspace
    from .profile_view import render_profiles
    from .progress import rollout_progress
    from .render import err_console

    ws = load_workspace()
    specs = [ws.load_harness(h) for h in harnesses]
    base_spec = ws.load_harness(base) if base else lineage_root(specs[0], ws.harnesses_dir)
    pol = policy_of(ws, policy, param, base_spec.manifest.env)
    where = placement(ws, workers, sandbox, executor, ray_address, fresh_container)
    runs = dict(split=split, rollouts=rollouts, seed=seed, command="profile")
    template = eval_request(ws, base_spec, suite, pol, where, **runs)
    db = ws.open_store(store)
    out_dir = out or ws.root / "profiles"
    env = base_spec.manifest.env
    anchor = policy_of(ws, anchor_policy, anchor_param, env) if anchor_policy else None
    drift = None
    with rollout_progress(err_console(), events=as_json) as progress:
        if reanchor:
            drift = refresh(
                specs, base_spec, template, db, anchor_policy=anchor, per_category=per_category,
                sample_seed=sample_seed, out_dir=out_dir, progress=progress,
            )  # fmt: skip
            pool = drift.profiles
        else:
            pool = profile_pool(specs, base_spec, template, db, out_dir=out_dir, progress=progress)
    render_profiles(pool, drift, template.policy.id, as_json=as_json)
    _say_in_sample(db, specs, split)
    from .written import commit_written

    commit_written(ws, pool.paths, f"profile: {len(pool.profiles)} harness(es)", template)


def _say_in_sample(db, specs, split: str) -> None:
    """A note on stderr when the profiled split is the one the harnesses' edits were
    judged on: their rescue figures are then in-sample."""
    from ..profiles.runner import edit_splits
    from .render import err_console, escape

    informed = sorted(n for n, splits in edit_splits(db, specs).items() if split in splits)
    if informed:
        err_console().print(
            escape(
                f"in-sample: the edits behind {', '.join(informed)} were judged on {split}, "
                f"the split profiled here; their rescue figures overstate held-out behaviour "
                "(as the router's evidence they are what it needs: judge routing on another "
                "split)"
            ),
            soft_wrap=True,
        )
