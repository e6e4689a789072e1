"""A command's run that groups the evaluations it makes (issue #41, "one run is one run").

``profile`` evaluates the base and each sibling, ``bench`` every harness and baseline arm on
held-out tasks, a routed eval the base and then the routed siblings: each of those
evaluations is a run of its own (its membership, its figures), made *under* the command's
run (``parent_id``), so ``harnessctl runs`` lists one row per command a person typed and
folds the rest (``--all`` expands them).

The group's own figures are its first harness's evaluation (the base's), as an evolve's are:
its membership is those rollouts, set by the command once the base is evaluated
(:meth:`RunGroup.stand_on`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..harness import HarnessSpec
from .evaluate import EvalRequest, start_run


@dataclass
class RunGroup:
    """The command's run while it works: :meth:`child` gives each evaluation's request."""

    id: str
    command: str
    members: list[Any] = field(default_factory=list)

    def child(self, request: EvalRequest, command: str | None = None) -> EvalRequest:
        """``request`` as a run under this one (named ``command``, the group's by default)."""
        return replace(request, command=command or self.command, parent_run=self.id)

    def stand_on(self, rows: list[Any]) -> None:
        """The rollouts the group's figures are (its first harness's evaluation)."""
        self.members = list(rows)


@contextlib.contextmanager
def run_group(
    store: Any, template: EvalRequest, command: str, harness: HarnessSpec
) -> Iterator[RunGroup]:
    """Record ``command``'s own run of ``harness`` (the base) while the block runs; it ends
    ``done`` with the members the block set, ``failed`` or ``interrupted`` if it raised."""
    from ..summary import summarize

    row = start_run(store, replace(template, harness=harness), command)
    group = RunGroup(row.id, command)
    status = "failed"
    try:
        yield group
        status = "done"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        members = group.members
        summary = summarize(members).to_dict() if members else None
        store.finish_run(row.id, status, summary, members)
