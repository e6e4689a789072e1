from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import JsonOption, StoreOption, finite

HoldoutOption = Annotated[
    str | None,
    typer.Option(
        help="Split by environment: every record of this environment to test, every other to "
        "train (an engineer trained on train never sees it; --test-fraction is then unused)."
    ),
]
DigestsOption = Annotated[
    int | None, typer.Option(min=0, help="Failure digests per prompt at most (shorter prompts).")
]


def export_edits_command(
    out: Annotated[Path, typer.Option(help="Output directory.")],
    evolve_id: Annotated[str | None, typer.Option(help="Only edits of this evolve run.")] = None,
    test_fraction: Annotated[
        float, typer.Option(min=0.0, max=1.0, callback=finite, help="Share of tasks held out.")
    ] = 0.2,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the task split.")] = 0,
    min_reward: Annotated[
        float,
        typer.Option(callback=finite, help="SFT keeps accepted edits with at least this reward."),
    ] = 1e-9,
    holdout_env: HoldoutOption = None,
    max_digests: DigestsOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export edit records as harness-engineer training data: SFT chat JSONL (also as
    prompt/completion) and self-contained GRPO prompt records with their reward recipe
    (rejected attempts and retry turns included), split by task (no task or failure batch on
    both sides) or by environment (--holdout-env), with schema.json, manifest.json and a
    dataset card. A split with no record is not written; the manifest and a warning say why."""
    from ..evolve.dataset import export_edits
    from ..results import ExportEditsResult
    from ..workspace import load_workspace
    from .render import console, escape, print_result

    ws = load_workspace()
    db = ws.open_store(store)
    try:
        edits = db.edits(evolve_id=evolve_id)
        export = export_edits(
            edits,
            out,
            test_fraction=test_fraction,
            seed=seed,
            min_reward=min_reward,
            store=db,
            workspace=ws,
            holdout_env=holdout_env,
            max_digests=max_digests,
        )
    finally:
        db.close()
    _warn(export, out)
    if as_json:
        empty = list(export.not_written)
        print_result(ExportEditsResult(out=str(out), counts=export.counts, empty=empty))
        return
    for name, n in export.counts.items():
        what = f"{n} records" if n else "not written (no record)"
        console().print(escape(f"{out / name}.jsonl: {what}"), soft_wrap=True)


def _warn(export, out: Path) -> None:
    """On stderr: the files not written and why, the edits left out, records without their
    parent's files."""
    from .render import err_console, escape

    for name, why in export.not_written.items():
        err_console().print(
            f"[bold yellow]warning:[/] {escape(f'{out / name}.jsonl')} has no record, so it "
            f"was not written: {escape(why)}",
            soft_wrap=True,
        )
    for reason, n in export.skipped.items():
        err_console().print(f"[bold yellow]warning:[/] {n} edit(s) left out: {escape(reason)}")
    if export.without_parent_tree:
        err_console().print(
            f"[bold yellow]warning:[/] {export.without_parent_tree} GRPO record(s) lack their "
            "parent harness's files (not in this workspace): scoring them needs a workspace "
            "that holds it"
        )
