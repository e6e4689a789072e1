"""The cost line and confirmation before a paid run (``eval --yes``)."""

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
        f"asking (threshold: {ENV_CONFIRM_USD}, else confirm_above_usd in harnessctl.yaml, "
        f"else ${DEFAULT_CONFIRM_USD:g}); without a terminal to ask on, such a run is "
        "refused unless --yes is given.",
    ),
]


def confirm_threshold(ws) -> float:
    """USD above which a run's cost bound needs confirmation: the variable, else the
    workspace's ``confirm_above_usd``, else the default."""
    from ..errors import ConfigError

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


def cost_gate(ws, request, *, yes: bool) -> Callable[[int], None]:
    """``before_run`` of :func:`harnessctl.run.evaluate.evaluate`: for a real model, print
    the estimate line, then ask (on a terminal) or refuse (exit 2) when the bound is above
    the threshold and ``--yes`` was not given."""
    from ..errors import ConfigError
    from ..gateway.preflight import estimate
    from ..policies import is_offline
    from .render import err_console, escape

    def gate(pending: int) -> None:
        model = request.policy.model
        if is_offline(model):
            return
        est = estimate(model, pending, request.max_calls, request.max_tokens)
        err_console().print(f"estimate: {escape(est.line())}", soft_wrap=True)
        threshold = confirm_threshold(ws)
        if est.usd is None or est.usd <= threshold or yes:
            return
        above = f"the bound ${est.usd:,.2f} is above the confirmation threshold ${threshold:g}"
        if sys.stdin.isatty() and sys.stderr.isatty():
            if typer.confirm(f"{above}: run it?", default=False, err=True):
                return
            raise ConfigError("--yes", f"{above}: not confirmed, nothing ran")
        raise ConfigError(
            "--yes",
            f"{above} ({ENV_CONFIRM_USD} or confirm_above_usd in harnessctl.yaml); pass --yes "
            "to run it",
        )

    return gate
