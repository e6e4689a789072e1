from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import JsonOption, StoreOption


def export_edits_command(
    out: Annotated[Path, typer.Option(help="Output directory.")],
    evolve_id: Annotated[str | None, typer.Option(help="Only edits of this evolve run.")] = None,
    test_fraction: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of tasks held out.")
    ] = 0.2,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the task split.")] = 0,
    min_reward: Annotated[
        float, typer.Option(help="SFT keeps accepted edits with at least this reward.")
    ] = 1e-9,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export edit records as harness-engineer training data: SFT chat JSONL and GRPO prompt
    records with their reward recipe, split by task (no task or failure batch on both
    sides), with schema.json and manifest.json."""
    from ..evolve.dataset import export_edits
    from ..results import ExportEditsResult
    from ..workspace import load_workspace
    from .render import console, err_console, escape, print_result

    edits = load_workspace().open_store(store).edits(evolve_id=evolve_id)
    counts = export_edits(edits, out, test_fraction=test_fraction, seed=seed, min_reward=min_reward)
    empty = [name for name, n in counts.items() if n == 0]
    for name in empty:
        err_console().print(
            f"[bold yellow]warning:[/] {escape(f'{out / name}.jsonl')} has no record: "
            + (
                "no edit's tasks fell on this side of the task split (raise --test-fraction "
                "or export more edits)"
                if name.endswith("/test")
                else "no edit qualified (an SFT record needs an accepted edit with at "
                "least --min-reward)"
            ),
            soft_wrap=True,
        )
    if as_json:
        print_result(ExportEditsResult(out=str(out), counts=counts, empty=empty))
        return
    for name, n in counts.items():
        console().print(escape(f"{out / name}.jsonl: {n} records"))
