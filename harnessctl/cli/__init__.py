"""The ``harnessctl`` command line: a thin layer that parses flags, calls one library
function and renders the result. Nothing imports it; command modules import the library
inside their functions so that ``--help`` starts fast."""

from __future__ import annotations

import typer

from . import (
    bench_cmd,
    eval_cmd,
    evolve_cmd,
    export_edits_cmd,
    export_harbor_cmd,
    export_traces_cmd,
    init_cmd,
    new_env_cmd,
    pool_cmd,
    profile_cmd,
    regress_cmd,
    report_cmd,
    route_cmd,
    runs_cmd,
    show_cmd,
    train_engineer_cmd,
    view_cmd,
)
from .render import handle_errors

app = typer.Typer(
    name="harnessctl",
    help=(
        "Harness evolution for LLM agents: evaluate harnesses in sandboxes, evolve sibling "
        "harnesses, profile them, export rescue pools for RL.\n\n"
        "Offline by default: the policy 'sim/<env>' (e.g. sim/dbbench) is the environment's "
        "simulated agent, a TEST DOUBLE that knows the answers and fails in seeded ways; "
        "'replay/<env>' is a TEST DOUBLE that answers with the gold. Pass any litellm model "
        "string (e.g. --policy openai/gpt-4o-mini) to use a real model.\n\n"
        "A suite's 'env:' names its environment kind: a built-in (in the sandbox, or served "
        "from the host through the rollout's gateway socket, like a simulator) or a plugin "
        "registered under the entry point group 'harnessctl.environments' "
        "(docs/environments.md)."
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    # plain help and usage errors: rich's renderer (rich.markdown, markdown_it) costs about
    # 0.1-0.15 s of every --help, which must start in under 0.5 s
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("harnessctl")
        except PackageNotFoundError:  # run from a source tree that was never installed
            number = "unknown (not installed)"
        typer.echo(f"harnessctl {number}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Harness evolution for LLM agents."""


app.command("eval")(handle_errors(eval_cmd.eval_command))
app.command("evolve")(handle_errors(evolve_cmd.evolve_command))
app.command("export-edits")(handle_errors(export_edits_cmd.export_edits_command))
app.command("export-traces")(handle_errors(export_traces_cmd.export_traces_command))
app.command("export-harbor")(handle_errors(export_harbor_cmd.export_harbor_command))
app.command("export-pool")(handle_errors(pool_cmd.export_pool_command))
app.command("rescue-sim")(handle_errors(pool_cmd.rescue_sim_command))
app.add_typer(pool_cmd.pool_app, name="pool")
app.command("show")(handle_errors(show_cmd.show_command))
app.command("rollouts")(handle_errors(show_cmd.rollouts_command))
app.command("init")(handle_errors(init_cmd.init_command))
app.command("new-env")(handle_errors(new_env_cmd.new_env_command))
app.command("profile")(handle_errors(profile_cmd.profile_command))
app.command("test")(handle_errors(regress_cmd.test_command))
app.command("route")(handle_errors(route_cmd.route_command))
app.command("report")(handle_errors(report_cmd.report_command))
app.command("runs")(handle_errors(runs_cmd.runs_command))
app.command("compare")(handle_errors(runs_cmd.compare_command))
app.command("view")(handle_errors(view_cmd.view_command))
app.command("bench")(handle_errors(bench_cmd.bench_command))
app.command("train-engineer")(handle_errors(train_engineer_cmd.train_engineer_command))


def main() -> None:
    app()
