"""``harnessctl report``: a self-contained HTML page about the workspace's store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..constants import ENV_POLICY
from .options import JsonOption, StoreOption


def report_command(
    out: Annotated[Path, typer.Option(help="Where the HTML file goes.")] = Path("report.html"),
    policy: Annotated[
        str | None,
        typer.Option(help="Policy id of the rollouts (default: workspace's).", envvar=ENV_POLICY),
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option(help="Suite id, name or directory (default: most rollouts)."),
    ] = None,
    split: Annotated[str | None, typer.Option(help="Split (default: most rollouts).")] = None,
    base: Annotated[
        str | None, typer.Option(help="Base of the rescue matrix (default: lineage root).")
    ] = None,
    per_cell: Annotated[int, typer.Option(min=0, help="Rollouts embedded per table cell.")] = 6,
    max_embedded: Annotated[
        int, typer.Option(min=0, help="Rollouts embedded in the whole page.")
    ] = 400,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write one HTML file (no network needed to view it): the lineage tree, the profile
    heatmap, the rescue matrix, costs per harness and per edit, and the trajectories of the
    rollouts behind every cell."""
    from ..report import write_report
    from ..workspace import load_workspace

    ws = load_workspace()
    suite_id, suite_dir = suite, None
    # a directory as the other commands take it: a path, else relative to the workspace
    found = [p for p in (Path(suite), ws.root / suite) if p.is_dir()] if suite else []
    if found:
        from ..suite import load_suite

        suite_dir = found[0]
        suite_id = load_suite(suite_dir).id
    from ..runs import suite_split_ids
    from .progress import stage
    from .render import err_console, escape

    with stage(err_console(), escape(f"report: reading the store and writing {out}")):
        result = write_report(
            ws.open_store(store),
            ws.harnesses_dir,
            out,
            policy_id=policy or ws.config.policy,  # else the policy with most rollouts
            suite=suite_id,
            split=split,
            base=base,
            per_cell=per_cell,
            max_embedded=max_embedded,
            split_tasks=lambda name, part: suite_split_ids(ws, name, part, suite_dir),
        )
    render_report(result, as_json=as_json)


def render_report(result, *, as_json: bool) -> None:
    from .render import console, escape, print_result

    if as_json:
        print_result(result)
        return
    console().print(
        escape(
            f"wrote {result.path} ({result.bytes / 1024:.0f} KiB): {len(result.harnesses)} "
            f"harnesses, {result.policy} {result.suite} {result.split}, "
            f"{result.embedded} rollouts embedded"
        )
    )
