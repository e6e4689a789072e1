"""Rollouts in standard trace formats, for tools outside harnessctl.

- ``otel``: OpenTelemetry traces as OTLP/JSON (one ``ExportTraceServiceRequest``), with the
  GenAI semantic conventions of :data:`otel.SEMCONV_VERSION`: Phoenix, MLflow, Langfuse and
  Weave read them (an OTLP/HTTP collector accepts the file as a request body).
- ``atif``: Harbor's Agent Trajectory Interchange Format (:data:`atif.ATIF_VERSION`), one
  JSON document per rollout.

Both read the typed trajectory (``records.Trajectory``) and nothing else; policy parameters
are redacted again on the way out (``gateway.protocol.redact``) whatever the stored
document says. Neither format needs a package to write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ..errors import ConfigError, HarnessctlError
from ..records import Result

FORMATS = ("otel", "atif")


class ExportTracesResult(Result):
    """``harnessctl export-traces --json``."""

    kind: Literal["export-traces"] = "export-traces"
    version: int = 1
    format: str
    spec: str
    """The format version followed: the semantic-conventions schema URL, or the ATIF version."""
    out: str
    rollouts: int
    """Rollouts written."""
    files: list[str] = Field(default_factory=list)
    skipped: dict[str, str] = Field(default_factory=dict)
    """Rollout id -> why it was left out (its trajectory unreadable or malformed)."""
    warnings: list[str] = Field(default_factory=list)
    """What was written other than recorded (a time outside its rollout, clamped)."""


def select_rollouts(
    ws: Any,
    store: Any,
    *,
    run: str | None = None,
    harness: str | None = None,
    task: str | None = None,
    outcome: str | None = None,
    limit: int | None = None,
) -> list:
    """Stored rollouts matching every filter given, newest first; an unknown outcome is
    refused, and a selection that matches nothing is an error naming the filters."""
    from ..outcomes import ALL_OUTCOMES

    if outcome is not None and outcome not in ALL_OUTCOMES:
        raise ConfigError("--outcome", f"{outcome!r} is not one of {', '.join(ALL_OUTCOMES)}")
    if run is not None:
        from ..runs import find_run, run_rollouts, split_task_ids

        found = find_run(store, run)
        rows = list(run_rollouts(store, found, split_task_ids(ws, found)).values())
    else:
        rows = store.rollouts(task_id=task)
    rows = [
        r
        for r in rows
        if (harness is None or r.harness_name == harness)
        and (task is None or r.task_id == task)
        and (outcome is None or r.outcome == outcome)
    ]
    rows.sort(key=lambda r: r.created_at, reverse=True)
    if not rows:
        raise HarnessctlError("no stored rollout matches the selection (`harnessctl rollouts`)")
    return rows[:limit] if limit else rows


def export_traces(store: Any, rows: list, fmt: str, out: Path) -> ExportTracesResult:
    """Write the rollouts ``rows`` (store rows) in ``fmt`` to ``out``: a file for ``otel``,
    a directory of ``<rollout id>.json`` for ``atif``. A rollout whose trajectory cannot be
    read or converted (a corrupt file, a malformed record: trajectories hold what sandboxes
    wrote) is left out and named in ``skipped``; the others are written."""
    if fmt not in FORMATS:
        raise ConfigError("--format", f"{fmt!r} is not one of {', '.join(FORMATS)}")
    from .atif import ATIF_VERSION, to_atif
    from .otel import SEMCONV_SCHEMA_URL, rollout_spans, to_otlp

    skipped: dict[str, str] = {}
    warnings: list[str] = []
    built: list[tuple[Any, Any, Any]] = []  # (row, trajectory, spans or ATIF document)
    for row in rows:
        try:
            trajectory = store.trajectory(row)
            made = (
                rollout_spans(row, trajectory, warnings)
                if fmt == "otel"
                else to_atif(row, trajectory)
            )
            json.dumps(made)  # a value JSON cannot write fails here, not mid-file
        except Exception as exc:  # untrusted content: one bad rollout never fails the export
            skipped[row.id] = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        built.append((row, trajectory, made))
    if not built:
        raise HarnessctlError(
            f"no rollout could be exported ({len(skipped)} skipped: "
            + "; ".join(f"{k}: {v}" for k, v in list(skipped.items())[:3])
            + ")"
        )
    if fmt == "otel":
        out.parent.mkdir(parents=True, exist_ok=True)
        pairs = [(row, t) for row, t, _ in built]
        spans = [span for _, _, made in built for span in made]
        out.write_text(json.dumps(to_otlp(pairs, spans)), encoding="utf-8")
        files = [str(out)]
    else:
        out.mkdir(parents=True, exist_ok=True)
        files = []
        for row, _, document in built:
            path = out / f"{row.id}.json"
            path.write_text(json.dumps(document, indent=1), encoding="utf-8")
            files.append(str(path))
    return ExportTracesResult(
        format=fmt,
        spec=SEMCONV_SCHEMA_URL if fmt == "otel" else ATIF_VERSION,
        out=str(out),
        rollouts=len(built),
        files=files,
        skipped=skipped,
        warnings=warnings,
    )
