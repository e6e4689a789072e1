"""``harnessctl evolve``: grow sibling harnesses from a base along repair directions."""

from __future__ import annotations

from typing import Annotated

import typer

from ..constants import DEFAULT_TIMEOUT_S
from .options import (
    ConfirmAboveOption,
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
    TimeoutOption,
    WorkersOption,
    eval_request,
    one_of,
    placement,
    policy_of,
    positive,
    unit_open,
)
from .preflight_view import YesOption

EDITOR_HELP = (
    "'rules' (default): the offline RULE-BASED editor, the environment's catalogue of known "
    "code repairs for its base harnesses (a test double, not a model); 'null': edits that "
    "change no behaviour, for measuring false acceptance (a test double); or any litellm "
    "model string, which answers with SEARCH/REPLACE blocks; 'engineer:DIR': a harness "
    "engineer trained by train-engineer (engineer:MODEL: the untrained catalogue model)."
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
BatchOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Failed tasks per edit, the parent's worst first (sequential gate, default 8); "
        "failure pairs re-run (same-batch gate, default 12).",
    ),
]
ControlOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Solved tasks judged too, for regressions (sequential, default 4); success pairs "
        "re-run (same-batch, default 12).",
    ),
]
GateOption = Annotated[
    str,
    typer.Option(
        callback=one_of("sequential", "same-batch"),
        help="How an edit is judged: 'sequential' (default): parent and child on fresh seeds "
        "of the judged tasks, one seed per look, an anytime-valid e-value test that stops on "
        "a clear win or loss; 'same-batch': the child re-run on the parent's own failures and "
        "successes, a sign test (biased by that selection under a sampled model).",
    ),
]
ErrorControlOption = Annotated[
    str,
    typer.Option(
        callback=one_of("fdr", "fwer", "none"),
        help="How the run's directions x rounds judgements share --alpha (sequential gate): "
        "'fdr' (default, e-LOND), 'fwer' (Bonferroni) or 'none'.",
    ),
]
MaxLooksOption = Annotated[
    int, typer.Option(min=1, help="Sequential gate: the most fresh seeds one judgement runs.")
]
DesignOption = Annotated[
    str,
    typer.Option(
        callback=one_of("auto", "sequential", "fixed"),
        help="Sequential gate's test: 'auto' (default) runs the fixed-sample sign test when a "
        "judgement may spend fewer than 180 pairs (it finds a repair for fewer rollouts there) "
        "and the anytime-valid e-value test otherwise; 'sequential' or 'fixed' force one.",
    ),
]
GuardOption = Annotated[
    bool,
    typer.Option(
        "--guard/--no-guard",
        help="Commit an edit only if the split guard also finds the child better on the whole "
        "split (parent and child on every task at the gate's fresh seeds; sequential gate).",
    ),
]
GuardAlphaOption = Annotated[
    float | None,
    typer.Option(
        callback=lambda value: None if value is None else unit_open(value),
        help="The split guard's own error budget over the run (default: --alpha).",
    ),
]
ScopeOption = Annotated[
    str,
    typer.Option(
        "--error-control-scope",
        callback=one_of("run", "workspace"),
        help="'run' (default): the error control covers this run's judgements; 'workspace': "
        "every evolve run of the workspace on this base and split together.",
    ),
]
WeakGateOption = Annotated[
    bool,
    typer.Option(
        "--allow-weak-gate",
        help="Run even when the budget detects no gain with power 0.8 (otherwise refused).",
    ),
]
AlphaOption = Annotated[
    float,
    typer.Option(
        callback=unit_open,
        help="The run's error level for accepting edits, in (0, 1] (the sequential gate "
        "shares it out by --error-control; the same-batch gate tests each edit at it).",
    ),
]
MinNetOption = Annotated[int, typer.Option(min=0, help="Rescues minus regressions at least.")]
ConfirmOption = Annotated[
    int,
    typer.Option(
        min=0,
        help="--gate same-batch only: fresh seeds on which parent and child re-run the judged "
        "tasks before an edit is accepted (the same sign test; 0, the default: none).",
    ),
]
RetriesOption = Annotated[int, typer.Option(min=0, help="Retries after a rejected patch.")]
MaxEditsOption = Annotated[int | None, typer.Option(min=1, help="Stop after this many edits.")]
MaxCostOption = Annotated[
    float | None,
    typer.Option(
        callback=positive,
        help="Stop before a round when the editor's recorded cost (USD) has reached this (the "
        "round's calls may pass it); it caps the editor's share of the cost estimate.",
    ),
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
    batch: BatchOption = None,
    control: ControlOption = None,
    gate: GateOption = "sequential",
    error_control: ErrorControlOption = "fdr",
    max_looks: MaxLooksOption = 30,
    design: DesignOption = "auto",
    guard: GuardOption = True,
    guard_alpha: GuardAlphaOption = None,
    error_control_scope: ScopeOption = "run",
    allow_weak_gate: WeakGateOption = False,
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
    max_calls: MaxCallsOption = None,
    max_tokens: MaxTokensOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
    yes: YesOption = False,
    confirm_above: ConfirmAboveOption = None,
) -> None:
    """Grow sibling harnesses from BASE along repair directions: each round an editor's patch
    is validated, judged against its parent on fresh seeds by an anytime-valid sequential test
    (--gate) at the run's --alpha (--error-control), checked on the whole split (--guard), and
    committed as harnesses/<base>.<dir>.rN. Says first what a paid model can cost (above the
    threshold: --yes) and what its budget can detect."""
    from ..evolve.engine import Engine
    from ..workspace import load_workspace
    from .evolve_view import direction_log, render_evolve_result
    from .preflight_view import evolve_cost
    from .progress import rollout_progress
    from .render import err_console

    options = dict(locals())  # every flag by name, read by _request
    ws = load_workspace()
    request = _request(ws, options)
    db = ws.open_store(store)
    evolve_cost(ws, request, db, yes=yes, confirm_above=confirm_above)  # before any rollout
    with rollout_progress(err_console(), events=as_json) as progress:  # stderr, as the log
        result = Engine(request, ws, db, log=direction_log(enabled=True), progress=progress).run()
    render_evolve_result(request.base, result, split=split, as_json=as_json)


def _request(ws, o: dict):
    """The ``EvolveRequest`` of ``evolve``'s flags ``o`` (by their parameter names)."""
    from ..sandbox import Limits

    spec = ws.load_harness(o["base"])
    pol = policy_of(ws, o["policy"], o["param"], spec.manifest.env)
    where = placement(
        ws, o["workers"], o["sandbox"], o["executor"], o["ray_address"], o["fresh_container"]
    )
    evaluation = eval_request(
        ws, spec, o["suite"], pol, where, split=o["split"], rollouts=o["rollouts"],
        limits=Limits(timeout_s=o["timeout"]), max_calls=o["max_calls"],
        max_tokens=o["max_tokens"],
    )  # fmt: skip
    same: tuple[str, ...] = ("rounds", "alpha", "min_net", "confirm_seeds", "error_control")
    same += ("editor_retries", "max_edits", "gate", "max_editor_cost", "max_looks", "design")
    same += ("guard", "guard_alpha", "allow_weak_gate")
    settings = {name: o[name] for name in same}
    settings |= dict(batch_size=o["batch"], control_size=o["control"])
    settings |= dict(error_scope=o["error_control_scope"])
    return evolve_request(
        ws, evaluation, o["directions"], o["editor"], o["editor_param"], **settings
    )


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

        # what its calls send (its own settings such as edit_format are not the provider's)
        sent = tool.call_params() if hasattr(tool, "call_params") else getattr(tool, "params", {})
        preflight(model, dict(sent or {}), option="--editor")
    return EvolveRequest(base=spec, eval=evaluation, directions=chosen, editor=tool, **settings)
