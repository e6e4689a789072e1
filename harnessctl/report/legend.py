"""The report's words for how an edit was judged: each lineage edge in the terms of the gate
that judged it (from the rule the edit recorded), the legend for the gates that ran, and the
reproduction of its claimed rescues with its verdict."""

from __future__ import annotations

import json
from html import escape as _escape
from typing import Any


def escape(value: Any) -> str:
    return _escape(str(value), quote=True)


def _p(p: float | None) -> str:
    return "" if p is None else f" &middot; p={p:.3f}"


def reproduced(edit: Any) -> str:
    """`` · reproduce a/n``: the edit's claimed rescues re-tested (nothing when unmeasured)."""
    from ..evolve.reproduce import read_reproduction

    found = read_reproduction(json.loads(edit.metrics_json or "{}"))
    if found is None:
        return ""
    title = escape(found.text())
    if not found.tested:
        return f' &middot; <span title="{title}">reproduce n/a</span>'
    null = f" (null {found.null_reproduced}/{found.null_tested})" if found.null_tested else ""
    mark = ""
    if found.summary()["verdict"] == "unreproduced":
        mark = ' <span class="tag">unreproduced: left out of pools</span>'
    return (
        f' &middot; <span title="{title}">reproduce {found.reproduced}/{found.tested}'
        f"{null}</span>{mark}"
    )


def _rule(edit: Any) -> dict:
    return json.loads(edit.metrics_json or "{}").get("rule") or {}


def judged(e: Any) -> str:
    """The edge's evidence in the terms of the gate that judged the edit."""
    rule = _rule(e)
    if rule.get("gate") == "sequential":
        looks = json.loads(e.metrics_json or "{}").get("looks") or [{}]
        pairs = looks[-1].get("pairs", 0)
        said = f"+{e.rescues} &minus;{e.regressions} of {pairs} fresh pairs{_p(e.p_value)}"
        guard = json.loads(e.metrics_json or "{}").get("guard")
        if guard:
            g = guard["looks"][-1]
            said += f" &middot; guard +{g['wins']} &minus;{g['losses']} of {g['pairs']}"
        return said
    return f"+{e.rescues}/{e.batch_size} &minus;{e.regressions}/{e.control_size}{_p(e.p_value)}"


def legend(edits: list[Any]) -> str:
    """The lineage's legend, for the gate(s) that judged these edits (from each edit's
    recorded rule)."""
    rules = {
        (r.get("gate", "same-batch"), r.get("error_control"), r.get("design"), r.get("guard"))
        for r in (_rule(e) for e in edits if e.status != "rejected")
    }
    parts = []
    for gate, control, design, guard in sorted(rules, key=str):
        if gate == "sequential":
            test = (
                "the fixed-sample sign test after the last look"
                if design == "fixed"
                else "an anytime-valid e-value test (p = 1/e)"
            )
            said = (
                "sequential gate: parent and child on fresh seeds of the judged tasks, "
                f"{test}, error control {control or 'fdr'} over the run; +wins &minus;losses "
                "of the fresh pairs judged"
            )
            if guard:
                said += (
                    "; split guard: committed only if parent and child on every task of the "
                    "split at the same seeds show the child better (its own error budget), "
                    "guard +wins &minus;losses of its pairs"
                )
            parts.append(said)
        else:
            parts.append(
                "same-batch gate: the child re-run on the parent's failure (batch) and success "
                "(control) pairs, +batch rescues/batch &minus;control regressions/control, "
                "one-sided sign-test p"
            )
    rule = " | ".join(parts) or "no judged edits"
    return (
        f"Edge label: direction &middot; reward &middot; {rule} &middot; round &middot; "
        "claimed rescues that reproduce where the parent fails afresh (fresh seeds, held-out "
        "tasks of the same categories), beside the parent alone tried again (null); an edit "
        "whose rescues reproduce no better than that is marked unreproduced and left out of "
        "exported pools unless asked."
    )
