"""The cost estimate before a paid run, and its confirmation (``--yes``, ``--confirm-above``).

The figures are the library's (:mod:`harnessctl.gateway.estimate`); this module words them
on stderr (stdout stays the command's, ``--json`` included) and asks on a terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Annotated

import typer

from ..constants import DEFAULT_CONFIRM_USD, ENV_CONFIRM_USD

YesOption = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Run a paid run whose cost bound is above the confirmation threshold without "
        f"asking (threshold: --confirm-above, else {ENV_CONFIRM_USD}, else confirm_above_usd "
        f"in harnessctl.yaml, else ${DEFAULT_CONFIRM_USD:g}); without a terminal to ask on, "
        "such a run is refused unless --yes is given.",
    ),
]


def confirm_threshold(ws, flag: float | None = None) -> float:
    """USD above which a run's cost bound needs confirmation: ``--confirm-above``, else the
    variable, else the workspace's ``confirm_above_usd``, else the default."""
    from ..errors import ConfigError

    if flag is not None:
        return flag
    raw = os.environ.get(ENV_CONFIRM_USD)
    if raw is None or not raw.strip():
        value = ws.config.confirm_above_usd
        return DEFAULT_CONFIRM_USD if value is None else float(value)
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(ENV_CONFIRM_USD, f"{raw!r} is not a number of USD") from None
    if not value >= 0 or value == float("inf"):
        raise ConfigError(ENV_CONFIRM_USD, f"{raw!r} is not a finite amount of 0 or more")
    return value


def cost_gate(
    ws, request, store=None, *, yes: bool, confirm_above: float | None = None
) -> Callable[[int], None]:
    """``before_run`` of :func:`harnessctl.run.evaluate.evaluate` (``eval``): the agent's
    share of the ``pending`` rollouts, said and confirmed by :func:`confirm_cost`."""
    from ..gateway.estimate import CostEstimate, agent_part

    def gate(pending: int) -> None:
        part = agent_part(request, pending, store)
        if part is not None:
            confirm_cost(ws, CostEstimate((part,)), yes=yes, confirm_above=confirm_above)

    return gate


def evolve_cost(ws, request, store, *, yes: bool, confirm_above: float | None = None) -> None:
    """``evolve``'s estimate (:func:`harnessctl.evolve.spend.evolve_estimate`), said and
    confirmed before its first rollout; a real agent model is checked first (the preflight,
    which evaluate then skips), so a missing key stops the run before it is priced."""
    from ..evolve.spend import evolve_estimate
    from ..gateway.preflight import preflight

    estimate = evolve_estimate(request, store)
    if any(p.role == "agent" and p.certain for p in estimate.parts):
        preflight(request.eval.policy.model, request.eval.policy.call_params)
    confirm_cost(ws, estimate, yes=yes, confirm_above=confirm_above)


def profile_cost(
    ws, template, harnesses, store, *, yes: bool, confirm_above: float | None = None
) -> None:
    """``profile``'s estimate: the rollouts of each of ``harnesses`` (the base first) under
    the evaluation ``template`` that the store does not hold, said and confirmed before the
    first; a real model is checked first."""
    from dataclasses import replace

    from ..gateway.estimate import CostEstimate, agent_part
    from ..run.pending import pending_rollouts

    unique = {h.name: h for h in harnesses}.values()
    pending = sum(pending_rollouts(replace(template, harness=h), store) for h in unique)
    part = agent_part(template, pending, store) if pending else None
    if part is not None:
        from ..gateway.preflight import preflight

        preflight(template.policy.model, template.policy.call_params)
        confirm_cost(ws, CostEstimate((part,)), yes=yes, confirm_above=confirm_above)


def confirm_cost(ws, estimate, *, yes: bool, confirm_above: float | None = None) -> None:
    """Print ``estimate`` (a ``CostEstimate``; nothing when it has no paid share), then, when
    its bound is above the threshold and ``--yes`` was not given, ask on a terminal or refuse
    (``ConfigError`` naming ``--yes``: exit 2, before any rollout)."""
    from ..errors import ConfigError
    from .render import err_console, escape

    if not estimate.parts:
        return
    console = err_console()
    for line in estimate_lines(estimate):
        console.print(f"estimate: {escape(line)}", soft_wrap=True)
    threshold = confirm_threshold(ws, confirm_above)
    if yes or not estimate.above(threshold):
        return
    above = (
        f"the bound ${estimate.bound_usd:,.2f} is above the confirmation threshold ${threshold:g}"
    )
    if sys.stdin.isatty() and sys.stderr.isatty():
        if typer.confirm(f"{above}: run it?", default=False, err=True):
            return
        raise ConfigError("--yes", f"{above}: not confirmed, nothing ran")
    raise ConfigError(
        "--yes",
        f"{above} (--confirm-above, {ENV_CONFIRM_USD} or confirm_above_usd in "
        "harnessctl.yaml); pass --yes to run it",
    )


def estimate_lines(estimate) -> list[str]:
    """One line per paid share, then the sum when there are several."""
    parts = estimate.parts
    lines = [(f"{p.role}: " if len(parts) > 1 else "") + part_line(p) for p in parts]
    if len(parts) > 1 and estimate.bound_usd is not None:
        unknown = f" (not counting {', '.join(p.role for p in estimate.unknown)})"
        lines.append(
            f"in all at most ${estimate.bound_usd:,.2f}{unknown if estimate.unknown else ''}"
        )
    return lines


def part_line(p) -> str:
    """A share in words: what runs, the bound, the price, the measured low end."""
    up_to = "up to " if p.certain < p.units else ""
    if p.unit == "rollout":
        head = (
            f"{up_to}{p.units:,} rollout(s) of {p.model} x up to {p.max_calls} calls and "
            f"{p.max_tokens:,} tokens each"
        )
    else:
        tokens = f"{p.max_input:,}" if p.max_input else "?"
        reply = f"{p.max_output:,}" if p.max_output else "?"
        head = (
            f"{up_to}{p.units:,} call(s) of {p.model} x up to {tokens} prompt and {reply} "
            "reply tokens each"
        )
    if p.how:
        head += f" ({p.how})"
    if p.price is None:
        return (
            f"{head}: price unknown to litellm (a local or custom model?): cost unknown; give "
            "input_cost_per_token and output_cost_per_token as params to price it"
        )
    source = "your price" if p.price.source == "params" else "litellm's price"
    bound = p.bound_usd
    if bound is None:
        return f"{head}: cost unknown, no bound on its reply (give max_tokens as an editor param)"
    capped = f", capped by --max-editor-cost ${p.cap_usd:g}" if p.cap_usd is not None else ""
    line = f"{head}: at most ${bound:,.2f} ({p.price.per_million()}, {source}{capped})"
    low = p.low_usd
    if low is not None and p.usage is not None:
        which = "the first evaluation" if up_to else "them"
        line += (
            f"; about ${low:,.2f} for {which} at the mean of {p.usage.samples} earlier "
            f"rollout(s) ({p.usage.prompt_tokens:,.0f} prompt + "
            f"{p.usage.completion_tokens:,.0f} completion tokens)"
        )
    return line
