"""``harnessctl profile``: behavior profiles, the rescue matrix, and re-anchoring."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import (
    ConfirmAboveOption,
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
from .preflight_view import YesOption

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
    yes: YesOption = False,
    confirm_above: ConfirmAboveOption = None,
) -> None:
    """Profile harnesses (cached evaluation): success with a 95% interval, per category,
    outcomes, cost percentiles, the rescue set against the base, a behavior card, and the
    pool's rescue matrix; stored, and written as YAML under profiles/. A paid model's cost
    is said before the first rollout (above the threshold: --yes)."""
    from ..workspace import load_workspace
    from .preflight_view import profile_cost
    from .profile_view import render_profiles
    from .progress import rollout_progress
    from .render import err_console
    from .written import commit_written

    options = dict(locals())  # every flag by name, read by the helpers
    ws = load_workspace()
    specs, base_spec, template = _template(ws, options)
    db = ws.open_store(store)
    if not reanchor:  # a re-anchoring sample's cost is not estimated here
        profile_cost(ws, template, [base_spec, *specs], db, yes=yes, confirm_above=confirm_above)
    with rollout_progress(err_console(), events=as_json) as progress:
        pool, drift = _profiles(ws, options, specs, base_spec, template, db, progress)
    render_profiles(pool, drift, template.policy.id, as_json=as_json)
    _say_in_sample(db, specs, split)
    commit_written(ws, pool.paths, f"profile: {len(pool.profiles)} harness(es)", template)


def _template(ws, o: dict):
    """The profiled harnesses, the base and the evaluation template of flags ``o``."""
    from ..harness import lineage_root

    specs = [ws.load_harness(h) for h in o["harnesses"]]
    base = ws.load_harness(o["base"]) if o["base"] else lineage_root(specs[0], ws.harnesses_dir)
    pol = policy_of(ws, o["policy"], o["param"], base.manifest.env)
    where = placement(
        ws, o["workers"], o["sandbox"], o["executor"], o["ray_address"], o["fresh_container"]
    )
    runs = dict(split=o["split"], rollouts=o["rollouts"], seed=o["seed"], command="profile")
    return specs, base, eval_request(ws, base, o["suite"], pol, where, **runs)


def _profiles(ws, o: dict, specs, base_spec, template, db, progress):
    """``(pool profiles, drift)``: the profiles, re-anchored when ``--reanchor`` asks."""
    from ..profiles.reanchor import reanchor as refresh
    from ..profiles.runner import profile_pool

    out_dir = o["out"] or ws.root / "profiles"
    if not o["reanchor"]:
        pool = profile_pool(specs, base_spec, template, db, out_dir=out_dir, progress=progress)
        return pool, None
    env = base_spec.manifest.env
    anchor = (
        policy_of(ws, o["anchor_policy"], o["anchor_param"], env) if o["anchor_policy"] else None
    )
    drift = refresh(
        specs, base_spec, template, db, anchor_policy=anchor, per_category=o["per_category"],
        sample_seed=o["sample_seed"], out_dir=out_dir, progress=progress,
    )  # fmt: skip
    return drift.profiles, drift


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
