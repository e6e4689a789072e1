"""``harnessctl evolve``: grow sibling harnesses from a base along repair directions."""

from __future__ import annotations

from typing import Annotated

import typer

from ..constants import DEFAULT_TIMEOUT_S
from .options import (
    ExecutorOption,
    FreshContainerOption,
    JsonOption,
    ParamOption,
    PolicyOption,
    RayAddressOption,
    SandboxOption,
    StoreOption,
    SuiteOption,
    TimeoutOption,
    WorkersOption,
    eval_request,
    placement,
    policy_of,
    positive,
    unit_open,
)

EDITOR_HELP = (
    "'rules' (default): the offline RULE-BASED editor, the environment's catalogue of known "
    "code repairs for its base harnesses (a test double, not a model); 'null': edits that "
    "change no behaviour, for measuring false acceptance (a test double); or any litellm "
    "model string, which answers with SEARCH/REPLACE blocks."
)
BaseArg = Annotated[str, typer.Argument(help="Base harness directory or name under harnesses/.")]
SplitOption = Annotated[str, typer.Option(help="Split the edits are judged on.")]
DirectionsOption = Annotated[
    str | None, typer.Option(help="Comma-separated direction names (default: all).")
]
RoundsOption = Annotated[int, typer.Option(min=1, help="Rounds per direction.")]
EditorOption = Annotated[str, typer.Option(help=EDITOR_HELP)]
EditorParamOption = Annotated[
    list[str] | None, typer.Option("--editor-param", help="Editor model key=value.")
]
RolloutsOption = Annotated[int, typer.Option(min=1, help="Seeds per task for the parent.")]
BatchOption = Annotated[int, typer.Option(min=1, help="Failures per edit (same-batch rescues).")]
ControlOption = Annotated[int, typer.Option(min=0, help="Parent successes re-run (regressions).")]
AlphaOption = Annotated[
    float,
    typer.Option(callback=unit_open, help="Sign-test level for accepting an edit, in (0, 1]."),
]
MinNetOption = Annotated[int, typer.Option(min=0, help="Rescues minus regressions at least.")]
ConfirmOption = Annotated[
    int,
    typer.Option(
        min=0,
        help="Fresh seeds on which parent and child re-run the judged tasks before an edit is "
        "accepted (the same sign test; 0, the default: the same-batch test alone).",
    ),
]
RetriesOption = Annotated[int, typer.Option(min=0, help="Retries after a rejected patch.")]
MaxEditsOption = Annotated[int | None, typer.Option(min=1, help="Stop after this many edits.")]
MaxCostOption = Annotated[
    float | None, typer.Option(callback=positive, help="Stop when editor cost (USD) reaches this.")
]


def evolve_command(
    base: BaseArg,
    suite: SuiteOption = None,
    split: SplitOption = "train",
    directions: DirectionsOption = None,
    rounds: RoundsOption = 2,
    editor: EditorOption = "rules",
    editor_param: EditorParamOption = None,
    policy: PolicyOption = None,
    param: ParamOption = None,
    rollouts: RolloutsOption = 2,
    batch: BatchOption = 12,
    control: ControlOption = 12,
    alpha: AlphaOption = 0.1,
    min_net: MinNetOption = 1,
    confirm_seeds: ConfirmOption = 0,
    editor_retries: RetriesOption = 2,
    max_edits: MaxEditsOption = None,
    max_editor_cost: MaxCostOption = None,
    workers: WorkersOption = None,
    sandbox: SandboxOption = None,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
    fresh_container: FreshContainerOption = False,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Grow sibling harnesses from BASE along repair directions: each round an editor
    proposes a patch, it is validated, judged by a same-batch paired re-run (rescues vs
    regressions), and an accepted child is committed as harnesses/<base>.<direction>.rN."""
    from ..evolve.engine import Engine
    from ..sandbox import Limits
    from ..workspace import load_workspace
    from .evolve_view import direction_log, render_evolve_result
    from .progress import rollout_progress
    from .render import err_console

    ws = load_workspace()
    spec = ws.load_harness(base)
    pol = policy_of(ws, policy, param, spec.manifest.env)
    where = placement(ws, workers, sandbox, executor, ray_address, fresh_container)
    limits = Limits(timeout_s=timeout)
    evaluation = eval_request(
        ws, spec, suite, pol, where, split=split, rollouts=rollouts, limits=limits
    )
    judge = dict(rounds=rounds, batch_size=batch, control_size=control, alpha=alpha)
    judge |= dict(min_net=min_net, confirm_seeds=confirm_seeds)
    stops = dict(
        editor_retries=editor_retries, max_edits=max_edits, max_editor_cost=max_editor_cost
    )
    request = evolve_request(ws, evaluation, directions, editor, editor_param, **judge, **stops)
    log = direction_log(enabled=True)  # stderr: --json keeps stdout pure
    with rollout_progress(err_console()) as progress:
        result = Engine(request, ws, ws.open_store(store), log=log, progress=progress).run()
    render_evolve_result(spec, result, split=split, as_json=as_json)


def evolve_request(ws, evaluation, directions: str | None, editor: str, editor_param, **settings):
    """The ``EvolveRequest`` from ``evaluation.harness``: the named directions (default: all
    its environment's), the editor by name; ``settings`` set the rest."""
    from ..evolve.directions import catalogue, select
    from ..evolve.editors import make_editor
    from ..evolve.engine import EvolveRequest
    from ..policy import parse_params

    spec = evaluation.harness
    family = spec.manifest.env
    chosen = select(directions.split(",") if directions else None, catalogue(family, ws.root))
    params = parse_params(editor_param or [])
    tool = make_editor(editor, workspace=ws.root, family=family, params=params)
    model = getattr(tool, "model", None)
    if isinstance(model, str):  # an LLM editor: a missing key stops evolve before round 1
        from ..gateway.preflight import preflight

        preflight(model, dict(getattr(tool, "params", {}) or {}), option="--editor")
    return EvolveRequest(base=spec, eval=evaluation, directions=chosen, editor=tool, **settings)
