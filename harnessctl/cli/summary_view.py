"""``harnessctl eval``'s output: the summary table, or its JSON."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .render import console, err_console, escape, pct, print_result, print_table, text


def render_eval(spec, request, result, *, as_json: bool) -> None:
    """Skipped task records and infrastructure failures to stderr; the summary to stdout."""
    for p in result.problems:
        err_console().print(f"[yellow]skipped[/] {escape(f'{p.file}:{p.line}: {p.message}')}")
    if as_json:
        print_result(result.record(request))
    else:
        render_summary(console(), spec, request, result)
    if result.infra_failed:
        err_console().print(
            f"[red]{len(result.infra_failed)} rollout(s) failed on "
            "infrastructure after retries; run the command again to retry.[/]"
        )


def render_summary(console: Console, spec, request, result) -> None:
    s = result.summary
    lo, hi = s.ci95
    params = f" {request.policy.params}" if request.policy.params else ""
    console.print(
        f"[bold]{escape(spec.name)}[/] ({spec.short_hash}) on "
        + escape(f"{request.suite.name}/{request.split} with {request.policy.model}{params}")
    )
    if result.executed == 0 and result.cached:
        console.print(f"all {result.cached} rollouts served from the cache (no new rollouts)")
    else:
        console.print(f"{result.executed} new rollouts, {result.cached} served from the cache")
    if s.rollouts == 0:
        console.print("no rollout finished: nothing to summarise")
        return
    console.print(
        f"success [bold]{pct(s.success_rate)}[/] ({s.successes}/{s.rollouts}, "
        f"95% CI {pct(lo)}-{pct(hi)}) over {s.tasks} tasks"
    )
    outcomes = Table(title="outcomes", show_edge=False)
    outcomes.add_column("outcome")
    outcomes.add_column("rollouts", justify="right")
    outcomes.add_column("share", justify="right")
    for name, count in sorted(s.outcomes.items(), key=lambda kv: -kv[1]):
        outcomes.add_row(text(name), str(count), pct(count / s.rollouts))
    print_table(console, outcomes, names=("outcome",))
    cats = Table(title="by category", show_edge=False)
    cats.add_column("category")
    cats.add_column("success", justify="right")
    cats.add_column("rollouts", justify="right")
    for name, row in s.categories.items():
        cats.add_row(text(name), pct(row.success_rate), str(row.rollouts))
    print_table(console, cats, names=("category",))
    console.print(
        f"tokens {s.prompt_tokens:,} prompt + {s.completion_tokens:,} completion, "
        f"cost ${s.cost_usd:.4f}, mean steps {s.mean_steps:.1f}, "
        f"wall p50 {s.wall_p50_s:.2f}s p95 {s.wall_p95_s:.2f}s"
    )
    console.print(
        escape(
            f"run {result.run_id[:12]}; its rollouts: harnessctl rollouts --harness {spec.name}"
            " (then harnessctl show ID for one's trajectory)"
        ),
        soft_wrap=True,
    )
