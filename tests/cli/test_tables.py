"""Terminal tables keep what a reader copies into the next command whole: long task ids and
harness names fold across lines instead of ending in an ellipsis, at any terminal width."""

import pytest
from rich.console import Console

from harnessctl.summary import RolloutItem, RolloutListRecord

TASK = "pick_clean_then_place_in_recep-Mug-None-CoffeeMachine-10.T20190909_150719_492274"
HARNESS = "alfworld-base-admissible-check-goal-reminder"


@pytest.mark.parametrize("width", [60, 80, 120])
def test_rollouts_list_shows_whole_task_ids_and_names(monkeypatch, width):
    from harnessctl.cli import render, show_cmd

    narrow = Console(width=width, record=True, highlight=False)
    monkeypatch.setattr(render, "console", lambda: narrow)
    item = RolloutItem(
        id="0123456789abcdef", run_id="r", harness=HARNESS, harness_hash="h", task=TASK,
        seed=3, policy="sim/alfworld", outcome="step_limit", success=False, steps=50,
        created_at=0.0,
    )  # fmt: skip
    show_cmd._render_list(RolloutListRecord(rollouts=[item]), attempts=False)
    out = narrow.export_text()
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= width
    # read column by column: the cells of each column, top to bottom, joined
    lines = [line for line in out.splitlines() if "│" in line]
    columns = list(zip(*(line.split("│") for line in lines), strict=True))
    joined = ["".join(part.strip() for part in col) for col in columns]
    assert TASK in joined and HARNESS in joined
    assert "step_limit" in joined and "50" in joined


def test_the_width_follows_columns_even_after_a_library_replaced_os_environ(monkeypatch):
    """datasets' multiprocess map leaves os.environ a new object; rich keeps the one it saw
    at import, so COLUMNS set afterwards would be ignored (a table folded at 80)."""
    import copy
    import os

    from harnessctl.cli import render

    monkeypatch.setattr(os, "environ", copy.deepcopy(os.environ))
    monkeypatch.setenv("COLUMNS", "250")
    assert render.console().width == 250
    monkeypatch.setenv("COLUMNS", "90")
    assert render.console().width == 90
