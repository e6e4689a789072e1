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


# --- piped tables (issue #56): a name a reader copies is never split --------------------
LONG = (
    "tau2-base.policy-adherence-and-confirmation.r1",
    "tau2-base.policy-adherence-and-confirmation.r1.tool-argument-validation.r2",
    "alfworld-base-admissible-check-goal-reminder.termination.r3",
)
CARD = (
    "Rescues airline tasks whose reservation must be confirmed before it is changed; loses "
    "some retail tasks where the user never answers the confirmation question at all."
)


def _piped(width: int) -> Console:
    """A console as a pipe or a log file gives it: not a terminal, ``width`` columns."""
    import io

    return Console(file=io.StringIO(), width=width, force_terminal=False, highlight=False)


def _whole_in_lines(out: str, names) -> None:
    lines = out.splitlines()
    for name in names:
        assert any(name in line for line in lines), (name, out)
    assert "…" not in out


def _evolve_result():
    from types import SimpleNamespace as NS

    best = {
        name: NS(name=name, direction="policy-adherence-and-confirmation", rescues=3,
                 regressions=1, success_rate=0.5, reproduction=None, cost_usd=0.0123)
        for name in LONG
    }  # fmt: skip
    variants = [
        NS(name=n, parent="tau2-base", direction="policy-adherence-and-confirmation",
           edit_id="0123456789", reproduction=None)
        for n in LONG
    ]  # fmt: skip
    return NS(evolve_id="e" * 12, base_success=0.25, best=best, error_control="",
              guard="", budget=None, history=None, union_rescues=5, edits=[],
              variants=variants, stopped=None)  # fmt: skip


@pytest.mark.parametrize("width", [60, 120])
def test_a_piped_evolve_table_keeps_every_harness_name_whole(width):
    from types import SimpleNamespace as NS

    from harnessctl.cli.evolve_view import render_evolve

    out = _piped(width)
    render_evolve(out, NS(name="tau2-base"), _evolve_result(), "train")
    text = out.file.getvalue()
    _whole_in_lines(text, [*LONG, "policy-adherence-and-confirmation"])
    # the other columns still fit around them: the figures are all there
    assert text.count("$0.0123") == len(LONG) and "50.0%" in text


def _pool():
    from types import SimpleNamespace as NS

    from harnessctl.records import RescueMatrix

    def profile(name):
        return NS(
            success=NS(rate=0.4, ci95=(0.2, 0.6)), rescue=NS(count=2, opportunities=7),
            harness=NS(reproduction=None), tokens=NS(mean=1234.0), card=NS(summary=CARD),
        )  # fmt: skip

    names = ["tau2-base", *LONG]
    matrix = RescueMatrix(
        harnesses=list(LONG), overlap={a: {b: 1 for b in LONG} for a in LONG},
        unique={a: ["t"] for a in LONG}, union=["t"], union_size=3, largest_single=2,
    )  # fmt: skip
    return NS(base="tau2-base", profiles={n: profile(n) for n in names}, matrix=matrix, paths=[])


@pytest.mark.parametrize("width", [60, 120])
def test_a_piped_profile_table_keeps_every_harness_name_whole(width):
    from harnessctl.cli.profile_view import render_pool

    out = _piped(width)
    render_pool(out, _pool(), "sim/tau2")
    text = out.file.getvalue()
    _whole_in_lines(text, LONG)
    # the matrix's rows too ("#N NAME"), and the card still wraps at spaces, whole words
    _whole_in_lines(text, [f"#{i + 1} {name}" for i, name in enumerate(LONG)])
    tokens = set(text.split())
    assert all(word in tokens for word in CARD.split())


def test_on_a_terminal_names_fold_at_its_width_and_nothing_is_cut():
    """A terminal keeps its width (no line past it); names fold there instead of ending in
    an ellipsis, so the whole name is still on screen."""
    import io

    from harnessctl.cli.profile_view import render_pool

    out = Console(file=io.StringIO(), width=70, force_terminal=True, color_system=None)
    render_pool(out, _pool(), "sim/tau2")
    text = out.file.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 70
    assert "…" not in text
