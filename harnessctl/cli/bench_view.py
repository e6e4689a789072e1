"""Output of ``harnessctl bench``."""

from __future__ import annotations

from rich.table import Table

from .render import console, escape, pct, print_result, print_table, text


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _tasks(result) -> int:
    return result.arms[0].tasks if result.arms else 0


def render_baselines(result, *, as_json: bool) -> None:
    if as_json:
        print_result(result)
        return
    out = console()
    table = Table(
        title=f"equal-budget baselines on {escape(result.heldout_split)} (held out), "
        f"{result.pairs} (task, seed) pairs, policy {escape(result.policy)}",
        show_edge=False,
    )
    cols = ("arm", "success", "95% CI", "rollouts", "model calls", "p vs best", "p vs base",
            "Holm vs base")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="left" if col == "arm" else "right", overflow="fold")
    for arm in result.arms:
        table.add_row(
            text(arm.name),
            f"{arm.successes}/{arm.pairs} {pct(arm.success_rate)}",
            f"{pct(arm.ci95[0])}-{pct(arm.ci95[1])}",
            str(arm.rollouts),
            str(arm.model_calls),
            _p(arm.vs_best_p),
            _p(arm.vs_base_p),
            _p(arm.vs_base_holm),
        )
    print_table(out, table, names=("arm",))
    if result.combined:
        held = ", ".join(result.combined_siblings) or "none"
        out.print(f"all repairs combined: {escape(result.combined)} holds {escape(held)}")
        for name, why in result.combined_left_out.items():
            out.print(f"  left out {escape(name)}: {escape(why)}", soft_wrap=True)
    out.print(
        f"best: {escape(result.best)}. Without a verifier every arm spends one rollout per "
        f"pair; 'verifier' arms read the scorer's verdict and spend up to {result.attempts}. "
        f"Evidence (best sibling, router profiles): {escape(result.evidence_split)}. p: exact "
        "two-sided sign-flip test at the task level (the seeds of a task are one cluster, "
        f"{_tasks(result)} tasks); Holm: adjusted over every arm compared with the base (read it "
        "when asking whether some arm beats the base).",
        soft_wrap=True,
    )
