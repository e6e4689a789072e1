"""Options shared by the commands that run rollouts (eval, evolve, profile, test)."""

from __future__ import annotations

from typing import Annotated

import typer

from ..constants import ENV_EXECUTOR, ENV_RAY_ADDRESS

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


def placement(
    ws, workers: int | None, sandbox: str | None, executor: str | None, ray_address: str | None
) -> dict:
    """EvalRequest fields saying where rollouts run: flags, else the workspace's settings."""
    return {
        "workers": workers or ws.config.workers,
        "sandbox": sandbox or ws.config.sandbox,
        "executor": executor or ws.config.executor,
        "ray_address": ray_address or ws.config.ray_address,
    }
