"""``harnessctl report``: one self-contained HTML page about a workspace's store.

The lineage of accepted edits (not-accepted ones per parent, with their reason), success per
(harness, task category), the rescue matrix against the base, costs per harness and per
edit, and, behind every cell, compact trajectories of its rollouts. See docs/report.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

PER_CELL = 6
MAX_EMBEDDED = 400


@dataclass(frozen=True)
class ReportResult:
    """Where the page went and what it holds."""

    path: Path
    bytes: int
    harnesses: list[str]
    policy_id: str
    suite: str
    split: str
    embedded: int


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
) -> ReportResult:
    """Build the report from ``store`` and write it to ``out`` (UTF-8)."""
    from .data import collect
    from .html import render
    from .trajectories import embed

    data = collect(store, harnesses_dir, policy_id, suite, split, base)
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
        policy_id=data.selection.policy_id,
        suite=data.selection.suite,
        split=data.selection.split,
        embedded=len(embedded),
    )
