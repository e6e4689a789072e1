"""How ``train-engineer`` shows its progress (the reward per step) and its result."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


def describe(step: Any) -> str:
    """One step's figures in words: loss; for GRPO the total, realised and validity."""
    parts = []
    if step.reward is not None:
        parts.append(f"reward {step.reward:+.3f}")
    if step.realized is not None:
        parts.append(f"realised {step.realized:+.3f}")
    if step.validity is not None:
        parts.append(f"valid {100 * step.validity:.0f}%")
    if step.loss is not None:
        parts.append(f"loss {step.loss:.4f}")
    return ", ".join(parts)


@contextmanager
def step_progress(console: Console, stage: str, events: bool = False) -> Iterator:
    """A progress callback ``(StepLog, total)``: a rich bar on a terminal with the last
    step's figures, a line a step otherwise, and with ``events`` one JSON object a line
    (``{"kind": "progress", "work": "train-engineer sft", "what": "steps", ...}``) on
    stderr, as the other long commands print them."""
    started = time.monotonic()
    work = f"train-engineer {stage}"
    if events:

        def emit(step: Any, total: int) -> None:
            line = {"kind": "progress", "work": work, "what": "steps", "done": step.step,
                    "total": total, "elapsed_s": round(time.monotonic() - started, 3),
                    "step": step.model_dump(mode="json")}  # fmt: skip
            console.file.write(json.dumps(line) + "\n")
            console.file.flush()

        yield emit
        return
    if not console.is_terminal:

        def plain(step: Any, total: int) -> None:
            console.print(f"{work}: step {step.step}/{total}: {describe(step)}", markup=False)

        yield plain
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[figures]}"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    task = bar.add_task(work, total=None, figures="loading the model and the data")

    def update(step: Any, total: int) -> None:
        bar.update(task, completed=step.step, total=total, figures=describe(step))

    with bar:
        yield update


def render_result(result: Any) -> None:
    from .render import console, escape

    out = console()
    out.print(
        f"engineer {result.engineer_id} ({result.stage}, {result.steps} steps on "
        f"{result.records} records, {result.seconds:.0f} s): {escape(result.out)}",
        soft_wrap=True,
    )
    if result.resumed_from is not None:
        out.print(f"resumed from the checkpoint of step {result.resumed_from}")
    if result.final is not None:
        out.print(f"last step: {describe(result.final)}")
    out.print(f"use it: harnessctl evolve BASE --editor engineer:{escape(result.out)}")
