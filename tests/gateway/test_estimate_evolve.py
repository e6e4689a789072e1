"""An evolve's rollouts counted before it runs (``harnessctl.evolve.spend``) bound what it
then runs: real evolve runs of the offline sim and the rule-based editor (whose repairs
are accepted, so the guard, the reproduction and the child's evaluation run too), under
both gates; and the editor's share of an LLM editor."""

from __future__ import annotations

import pytest

from harnessctl.evolve.directions import catalogue
from harnessctl.evolve.editors import LLMEditor, make_editor
from harnessctl.evolve.engine import Engine, EvolveRequest
from harnessctl.evolve.spend import editor_part, evolve_estimate, evolve_rollouts
from harnessctl.gateway.estimate import Price
from tests.helpers.evolve import committed_workspace_eval

KEPT = [*range(0, 4), *range(20, 24), *range(40, 44)]
"""The example suite's tasks kept (four of each category): its train split is then three
of each, which keeps a guarded evolve to a few hundred sim rollouts."""


def request_for(workspace, editor=None, **options) -> tuple:
    tasks = workspace / "examples" / "dbbench" / "dev.jsonl"
    if len(lines := tasks.read_text().splitlines()) > len(KEPT):
        tasks.write_text("".join(lines[i] + "\n" for i in KEPT))
    ws, base, evaluation = committed_workspace_eval(workspace, split="train", timeout_s=20)
    catalog = catalogue("dbbench")
    request = EvolveRequest(
        base=base,
        eval=evaluation,
        directions=[catalog["execution-recovery"], catalog["format-validation"]],
        editor=editor or make_editor("rules", family="dbbench"),
        rounds=1,
        batch_size=4,
        control_size=2,
        allow_weak_gate=True,
        **options,
    )
    return ws, request


@pytest.mark.slow  # two real evolve runs: a minute or two on two cores
@pytest.mark.parametrize(
    "options",
    [
        {"max_looks": 2, "alpha": 1.0, "min_net": 0},  # sequential, guarded, accepting
        {"gate": "same-batch", "alpha": 1.0, "min_net": 0, "confirm_seeds": 1},
    ],
    ids=["sequential", "same-batch"],
)
def test_the_count_bounds_what_an_evolve_runs(workspace, options):
    ws, request = request_for(workspace, **options)
    store = ws.open_store()
    counted = evolve_rollouts(request, store)
    split = request.eval.suite.tasks("train").tasks
    assert counted.base == len(split) == 9  # the split, once each, nothing stored yet
    assert counted.judgements == 2 * 1 * 3  # directions x rounds x (retries + 1)
    result = Engine(request, ws, store).run()
    ran = store.rollouts()
    assert ran and len(ran) <= counted.total, (len(ran), counted)
    assert any(e.status != "rejected" for e in result.edits)  # judged, not only validated
    # the sim is free: no agent share; the rule-based editor is no model: none either
    assert evolve_estimate(request, store).parts == ()
    assert evolve_rollouts(request, store).base == 0  # the base is stored now


def test_an_llm_editors_share(workspace):
    priced = {"input_cost_per_token": 1e-6, "output_cost_per_token": 5e-6}
    editor = LLMEditor("openai/local-editor", {"api_base": "http://127.0.0.1:9/v1", **priced})
    _, request = request_for(workspace, editor, editor_retries=1, max_editor_cost=0.2)
    part = editor_part(request)
    assert part is not None and (part.units, part.unit) == (2 * 1 * 2, "call")
    assert part.price == Price(1e-6, 5e-6, "params")
    assert part.max_output is None and part.bound_usd is None  # no reply cap: no bound
    # a reply cap bounds it; the prompt, unknown to litellm, is sized from the harness files,
    # the digests and a retry's reply and feedback, in bytes
    capped = LLMEditor(editor.model, {**editor.params, "max_tokens": 1000})
    _, request = request_for(workspace, capped, editor_retries=1, max_editor_cost=0.2)
    part = editor_part(request)
    assert part.max_output == 1000 and 4 * 8192 < part.max_input < 200_000
    each = part.max_input * 1e-6 + 1000 * 5e-6
    assert part.bound_usd == pytest.approx(min(4 * each, 0.2 + 2 * each))
    # a model litellm knows: its own window and reply cap, and its price
    known = LLMEditor("openai/gpt-4o-mini", {"api_base": "http://127.0.0.1:9/v1"})
    _, request = request_for(workspace, known)
    part = editor_part(request)
    assert (part.max_input, part.max_output) == (128_000, 16_384)
    assert part.price == Price(1.5e-7, 6e-7, "litellm")
    assert editor_part(request_for(workspace, LLMEditor("sim/dbbench"))[1]) is None
