"""``harnessctl report``: one self-contained HTML page about a workspace's store.

The lineage of accepted edits (not-accepted ones per parent, with their reason), success per
(harness, task category), the rescue matrix against the base, costs per harness and per
edit, and, behind every cell, compact trajectories of its rollouts. See docs/report.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

PER_CELL = 6
MAX_EMBEDDED = 400
REPORT_RESULT_VERSION = 1


class ReportResult(BaseModel):
    """Where the page went and what it holds; ``harnessctl report --json`` prints it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["report"] = "report"
    version: int = REPORT_RESULT_VERSION
    path: Path
    bytes: int
    """The page's size."""
    harnesses: list[str]
    """The harnesses shown, as labelled on the page."""
    policy: str
    """The policy id of the rollouts shown."""
    suite: str
    split: str
    embedded: int
    """Rollouts whose trajectories the page embeds."""


def write_report(
    store: Any,
    harnesses_dir: Path,
    out: Path,
    *,
    policy_id: str | None,
    suite: str | None = None,
    split: str | None = None,
    base: str | None = None,
    per_cell: int = PER_CELL,
    max_embedded: int = MAX_EMBEDDED,
    split_tasks: Callable[[str, str], set[str] | None] | None = None,
) -> ReportResult:
    """Build the report from ``store`` and write it to ``out`` (UTF-8); ``split_tasks`` as
    :func:`.data.collect` takes it."""
    from .data import collect
    from .html import render
    from .trajectories import embed

    data = collect(store, harnesses_dir, policy_id, suite, split, base, split_tasks)
    embedded: dict[str, Any] = {}

    def embed_rows(rows: list[Any]) -> dict[str, Any]:
        embedded.update(embed(store, rows))
        return embedded

    page = render(data, embed_rows, per_cell=per_cell, max_embedded=max_embedded)
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = page.encode("utf-8")
    out.write_bytes(raw)
    return ReportResult(
        path=out,
        bytes=len(raw),
        harnesses=[label for label, _ in data.harnesses],
        policy=data.selection.policy_id,
        suite=data.selection.suite,
        split=data.selection.split,
        embedded=len(embedded),
    )
