"""Option declarations shared by the commands, and the helpers that turn them into requests.

Each alias carries its flag, help and ``HARNESSCTL_*`` variable (names in
``harnessctl.constants``), so every command spells a setting the same way. Nothing heavy is
imported at module level: ``--help`` reads these.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from ..constants import (
    DEFAULT_MAX_CALLS,
    DEFAULT_MAX_TOKENS,
    ENV_DOCKER_FRESH,
    ENV_EXECUTOR,
    ENV_MODEL_TIMEOUT,
    ENV_POLICY,
    ENV_RAY_ADDRESS,
    ENV_SANDBOX,
    ENV_STORE_URL,
    ENV_WORKERS,
)

POLICY_HELP = (
    "Any litellm model string (openai/gpt-4o-mini, anthropic/..., hosted_vllm/...). "
    "Default: the workspace's policy, else 'sim/<env>', the environment's simulated agent "
    "(e.g. sim/dbbench), an offline TEST DOUBLE that knows the answers and fails in seeded "
    "ways (docs/sim-policy.md). 'replay/<env>' is a TEST DOUBLE that answers with the gold."
)

SuiteOption = Annotated[
    str | None, typer.Option(help="Suite directory or suite.yaml (default: the workspace's).")
]
PolicyOption = Annotated[str | None, typer.Option(help=POLICY_HELP, envvar=ENV_POLICY)]
ParamOption = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        "-p",
        help="Policy parameter key=value (repeatable), e.g. "
        "skill=0.8 for sim, temperature=0.7, api_base=http://...",
    ),
]
RolloutsOption = Annotated[int, typer.Option(min=1, help="Rollouts (seeds) per task.")]
SeedOption = Annotated[int, typer.Option(min=0, help="First seed; rollouts use seed..seed+N-1.")]
WorkersOption = Annotated[
    int | None, typer.Option(min=1, help="Parallel rollouts.", envvar=ENV_WORKERS)
]
SandboxOption = Annotated[
    str | None,
    typer.Option(help="Sandbox backend (local, docker or a registered one).", envvar=ENV_SANDBOX),
]
FreshContainerOption = Annotated[
    bool,
    typer.Option(
        "--fresh-container",
        help="Docker: one container per rollout, created for it and removed after it (no "
        "state can cross rollouts; about twice the per-rollout cost of the default hardened "
        "warm containers, docs/sandboxes.md). The local backend starts every rollout fresh.",
        envvar=ENV_DOCKER_FRESH,
    ),
]
ExecutorOption = Annotated[
    str | None,
    typer.Option(
        help="Where rollouts run: 'local' (threads here, the default) or 'ray' (one Ray task "
        "per rollout on a Ray cluster; pip install 'harnessctl[ray]').",
        envvar=ENV_EXECUTOR,
    ),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        help="Ray cluster to join with --executor ray ('auto', 'HOST:6379', "
        "'ray://HOST:10001'); default: RAY_ADDRESS, else a local cluster.",
        envvar=ENV_RAY_ADDRESS,
    ),
]


def finite(value: float | None) -> float | None:
    """An option callback: the value must be a finite number (``nan`` and ``inf`` parse as
    floats, and then compare false with everything or make every limit void)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def positive(value: float | None) -> float | None:
    """An option callback: the value must be finite and above 0 (a limit of 0 or less
    means nothing)."""
    finite(value)
    if value is not None and value <= 0:
        raise typer.BadParameter(f"{value} is not above 0")
    return value


MAX_TIMEOUT_S = 1800.0
"""The largest ``--timeout``: 30 minutes of a harness's own time per rollout."""


def rollout_timeout(value: float) -> float:
    """An option callback for ``--timeout``: finite, above 0, at most :data:`MAX_TIMEOUT_S`."""
    positive(value)
    if value > MAX_TIMEOUT_S:
        raise typer.BadParameter(f"{value:g} is above the limit of {MAX_TIMEOUT_S:g} s (30 min)")
    return value


def unit_open(value: float) -> float:
    """An option callback: the value must lie in (0, 1] (``nan`` does not)."""
    if not 0 < value <= 1:
        raise typer.BadParameter(f"{value} is not in (0, 1]")
    return value


def one_of(*choices: str):
    """An option callback: the value must be one of ``choices``."""

    def check(value: str) -> str:
        if value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return check


TimeoutOption = Annotated[
    float,
    typer.Option(
        callback=rollout_timeout,
        help="Wall-clock seconds per rollout of the harness's own time (above 0, at most "
        "1800 = 30 min): time waiting on model calls and environment steps is not counted.",
    ),
]
ModelTimeoutOption = Annotated[
    float | None,
    typer.Option(
        callback=positive,
        help="Seconds one model call may take (default: harnessctl.yaml's model_timeout_s, "
        "else 120 for a provider, whose call is re-sent after it, and 600 for a server on "
        "this machine, whose call is sent once). Not part of the rollout cache key.",
        envvar=ENV_MODEL_TIMEOUT,
    ),
]
StoreOption = Annotated[
    str | None, typer.Option(help="Store SQLAlchemy URL.", envvar=ENV_STORE_URL)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def policy_of(ws, model: str | None, params: list[str] | None, env: str):
    """The policy of --policy and --param, else the workspace's, else the offline simulated
    test double of the environment ``env`` (``sim/<env>``)."""
    from ..policies import default_policy
    from ..policy import Policy, parse_params

    return Policy(model or ws.config.policy or default_policy(env), parse_params(params or []))


def placement(
    ws,
    workers: int | None,
    sandbox: str | None,
    executor: str | None,
    ray_address: str | None,
    fresh_container: bool = False,
) -> dict:
    """EvalRequest fields saying where rollouts run: flags, else the workspace's settings.
    ``--fresh-container`` is a docker mode: with another backend it is a usage error."""
    chosen = sandbox or ws.config.sandbox
    if fresh_container and chosen != "docker":
        raise typer.BadParameter(
            f"applies to --sandbox docker, not {chosen!r} (the local backend already starts "
            "every rollout in a fresh sandbox)",
            param_hint="--fresh-container",
        )
    return {
        "workers": workers or ws.config.workers,
        "sandbox": chosen,
        "executor": executor or ws.config.executor,
        "ray_address": ray_address or ws.config.ray_address,
        "fresh_container": fresh_container,
    }


def eval_request(ws, harness, suite: str | None, policy, where: dict, **fields):
    """An ``EvalRequest`` of ``harness`` on the --suite (else the workspace's) under
    ``policy``, placed by ``where`` (see :func:`placement`); ``fields`` set the rest. A
    command without ``--model-timeout`` takes ``HARNESSCTL_MODEL_TIMEOUT``, else the
    workspace's ``model_timeout_s``."""
    from ..run.evaluate import EvalRequest

    if fields.get("model_timeout_s") is None:
        fields["model_timeout_s"] = model_timeout(ws)

    return EvalRequest(
        harness=harness, suite=ws.load_suite(suite), policy=policy, **where, **fields
    )


def model_timeout(ws, flag: float | None = None) -> float | None:
    """The run's model-call timeout: the flag, else ``HARNESSCTL_MODEL_TIMEOUT``, else the
    workspace's ``model_timeout_s``, else None (the endpoint's default)."""
    import os

    from ..errors import ConfigError

    if flag is not None:
        return flag
    raw = os.environ.get(ENV_MODEL_TIMEOUT, "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(ENV_MODEL_TIMEOUT, f"{raw!r} is not a number of seconds above 0")
        return value
    return ws.config.model_timeout_s


def pool_arg(pool: str) -> Path | list[str]:
    """POOL: a directory of harness directories, or comma-separated names/directories."""
    from ..harness import MANIFEST

    path = Path(pool)
    if path.is_dir() and not (path / MANIFEST).is_file():
        return path
    names = [n.strip() for n in pool.split(",") if n.strip()]
    if not names:
        raise typer.BadParameter("POOL names no harness")
    return names


MaxCallsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help=f"Model calls per rollout (default: the environment's own, else {DEFAULT_MAX_CALLS}).",
    ),
]
MaxTokensOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Prompt+completion tokens per rollout (default: the environment's own, else "
        f"{DEFAULT_MAX_TOKENS:,}).",
    ),
]


def usd_amount(value: float | None) -> float | None:
    """An option callback: a finite amount of USD, 0 or more."""
    finite(value)
    if value is not None and value < 0:
        raise typer.BadParameter(f"{value} is below 0")
    return value


ConfirmAboveOption = Annotated[
    float | None,
    typer.Option(
        "--confirm-above",
        metavar="USD",
        callback=usd_amount,
        help="Ask before a paid run whose cost bound (printed before the first rollout) is "
        "above this many USD; without a terminal such a run is refused (exit 2) unless --yes "
        "is given. Default: HARNESSCTL_CONFIRM_USD, else confirm_above_usd in harnessctl.yaml, "
        "else 5.",
    ),
]
