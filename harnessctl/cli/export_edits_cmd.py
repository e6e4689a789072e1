from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import StoreOption


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
) -> None:
    """Export edit records as harness-engineer training data: SFT chat JSONL and GRPO prompt
    records with their reward recipe, split by task (no task or failure batch on both
    sides), with schema.json and manifest.json."""
    from ..evolve.dataset import export_edits
    from ..workspace import load_workspace
    from .render import console, escape

    edits = load_workspace().open_store(store).edits(evolve_id=evolve_id)
    counts = export_edits(edits, out, test_fraction=test_fraction, seed=seed, min_reward=min_reward)
    for name, n in counts.items():
        console().print(escape(f"{out / name}.jsonl: {n} records"))
