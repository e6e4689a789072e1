"""Judgements beyond one run: the evolve runs of a workspace on the same base and split.

Each evolve run controls the error of its own judgements (:class:`.gate.ErrorControl`). A
user who evolves the same base on the same split again (another editor, more rounds, a new
direction) makes more judgements of the same kind of claim, "this edit improves the base on
this split", and false acceptances add up over runs. :func:`workspace_history` counts the
earlier runs' judgements and acceptances from the store (``evolve`` prints them), and
``--error-control-scope workspace`` controls them together: e-LOND over the whole sequence,
run j of the workspace (in the order of its first edit) getting the share
``RUN_SHARE(j) = 6 / (pi^2 j^2)`` of alpha (the shares sum to 1 over any number of runs), its
t-th judgement the level ``alpha * share_j / m_j * (acceptances before it in the workspace
+ 1)``. The false discovery rate over every judgement of the workspace is then at most alpha
(the e-LOND bound holds for any sequence of levels whose weights sum to at most one).
A resumed run keeps its position, so its judgements keep their levels.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, ConfigDict

SCOPES = ("run", "workspace")


def run_share(index: int) -> float:
    """The share of alpha the ``index``-th run (1-based) of a workspace's sequence gets."""
    if index < 1:
        raise ValueError(f"run index {index} must be >= 1")
    return 6 / (math.pi**2 * index**2)


class History(BaseModel):
    """What the workspace already judged on this base, suite and split."""

    model_config = ConfigDict(extra="forbid")
    position: int
    """This run's place among the workspace's runs on this base and split (1: the first)."""
    earlier_runs: list[str] = []
    """Evolve ids of the runs before it."""
    judgements: int = 0
    """Edits those runs judged (proposals that passed validation)."""
    accepted: int = 0
    """...and accepted."""
    scope: str = "run"
    """``run``: each run controls its own judgements; ``workspace``: all of them together."""

    @property
    def share(self) -> float:
        """This run's share of alpha (1 unless the scope is the workspace)."""
        return run_share(self.position) if self.scope == "workspace" else 1.0

    @property
    def accepted_before(self) -> int:
        """Acceptances the error control counts before this run's first judgement."""
        return self.accepted if self.scope == "workspace" else 0

    def text(self) -> str:
        if not self.earlier_runs:
            return "workspace: the first evolve run on this base and split"
        said = (
            f"workspace: {self.judgements} earlier judgements on this base and split in "
            f"{len(self.earlier_runs)} runs ({self.accepted} accepted); "
        )
        if self.scope == "workspace":
            return said + (
                f"controlled together with them (this run is number {self.position}, share "
                f"{self.share:.3g} of alpha)"
            )
        return said + "this run controls its own (--error-control-scope workspace: all together)"


def _base_of(edits: list[Any]) -> str | None:
    """The base a run's edits were made from: recorded with each edit, or (older records)
    the parent of its first-round edits."""
    for e in edits:
        base = json.loads(e.metrics_json or "{}").get("base_hash")
        if base:
            return str(base)
    firsts = [e.parent_hash for e in edits if e.round == 1]
    return firsts[0] if firsts else None


def workspace_history(
    store: Any, *, base_hash: str, suite: str, split: str, evolve_id: str, scope: str = "run"
) -> History:
    """The earlier runs of the workspace on ``base_hash``, ``suite`` (its id) and ``split``."""
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r} is not one of {', '.join(SCOPES)}")
    runs: dict[str, list[Any]] = {}
    for edit in store.edits():
        metrics = json.loads(edit.metrics_json or "{}")
        if metrics.get("split") == split and metrics.get("suite") == suite:
            runs.setdefault(edit.evolve_id, []).append(edit)
    mine = {k: v for k, v in runs.items() if k == evolve_id or _base_of(v) == base_hash}
    first = {k: min(e.created_at for e in v) for k, v in mine.items()}
    if evolve_id in first:
        earlier = [k for k in first if (first[k], k) < (first[evolve_id], evolve_id)]
    else:
        earlier = [k for k in first if k != evolve_id]
    earlier.sort(key=lambda k: (first[k], k))
    judged = [e for k in earlier for e in mine[k] if e.status != "rejected"]
    return History(
        position=len(earlier) + 1,
        earlier_runs=earlier,
        judgements=len(judged),
        accepted=sum(1 for e in judged if e.accepted),
        scope=scope,
    )
