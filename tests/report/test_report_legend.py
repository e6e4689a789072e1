"""The report says how its edits were judged (issue #54): the legend describes the gate(s)
that ran, from each edit's recorded rule, each edge gives the evidence in that gate's terms,
and an edit whose claimed rescues do not reproduce is marked."""

from __future__ import annotations

import json
from types import SimpleNamespace

from harnessctl.evolve.reproduce import Reproduction
from harnessctl.report.legend import judged, legend, reproduced


def edit(rule: dict, **metrics) -> SimpleNamespace:
    return SimpleNamespace(
        status="accepted", rescues=7, regressions=1, batch_size=8, control_size=4,
        p_value=0.004, metrics_json=json.dumps({"rule": rule, **metrics}),
    )  # fmt: skip


SEQUENTIAL = {"gate": "sequential", "error_control": "fdr", "design": "sequential", "guard": True}


def test_the_legend_describes_each_gate_that_ran():
    text = legend([edit(SEQUENTIAL)])
    assert "sequential gate: parent and child on fresh seeds" in text
    assert "anytime-valid e-value test" in text and "error control fdr" in text
    assert "split guard: committed only if" in text and "same-batch" not in text
    fixed = legend([edit(SEQUENTIAL | {"design": "fixed", "guard": False})])
    assert "fixed-sample sign test" in fixed and "split guard" not in fixed
    both = legend([edit({"gate": "same-batch"}), edit(SEQUENTIAL)])
    assert "same-batch gate: the child re-run on the parent's failure" in both
    assert "sequential gate" in both
    assert "no judged edits" in legend([])


def test_an_edge_gives_the_evidence_of_its_gate_and_the_reproduction_verdict():
    looks = [{"pairs": 60}]
    guard = {"looks": [{"wins": 9, "losses": 2, "pairs": 80}]}
    said = judged(edit(SEQUENTIAL, looks=looks, guard=guard))
    assert said.startswith("+7 &minus;1 of 60 fresh pairs")
    assert "guard +9 &minus;2 of 80" in said
    assert judged(edit({"gate": "same-batch"})).startswith("+7/8 &minus;1/4")
    bad = Reproduction(claimed=5, fresh_tested=5, fresh_reproduced=1, null_tested=5,
                       null_reproduced=3).model_dump(mode="json")  # fmt: skip
    mark = reproduced(edit(SEQUENTIAL, reproduction=bad))
    assert "reproduce 1/5 (null 3/5)" in mark and "unreproduced: left out of pools" in mark
    good = dict(bad, fresh_reproduced=5)
    assert "unreproduced" not in reproduced(edit(SEQUENTIAL, reproduction=good))
