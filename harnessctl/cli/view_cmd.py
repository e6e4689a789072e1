"""``harnessctl view``: the local, read-only web viewer over the store (``harnessctl.view``)."""

from __future__ import annotations

from typing import Annotated

import typer

from .options import StoreOption


def view_command(
    host: Annotated[
        str,
        typer.Option(
            help="Address to listen on. The default, 127.0.0.1, serves this machine only; the "
            "store holds prompts and replies, so expose it elsewhere knowingly."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8765,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            help="Another name requests may give as their Host (repeatable); loopback names "
            "and --host are allowed, any other Host is refused (DNS rebinding)."
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Serve a read-only web viewer over the store: runs, rollouts with filters, each
    trajectory with every model call, tool call and environment step, the evolution lineage
    and the profiles. The page polls, so a running eval's new rollouts appear as they land.
    Prints a URL holding a token made for this launch: only a browser that opened it reads
    the store (requests with a foreign Host or from another origin are refused too).
    Needs the 'view' extra: pip install 'harnessctl[view]'. Ctrl-C stops it."""
    from ..errors import ConfigError
    from ..view import LOOPBACK
    from ..workspace import load_workspace
    from .render import err_console

    try:
        import uvicorn

        from ..view.app import create_app
    except ImportError as exc:
        raise ConfigError(
            "view",
            f"the viewer needs the 'view' extra ({exc.name} is missing): "
            "pip install 'harnessctl[view]'",
        ) from None
    ws = load_workspace()
    db = ws.open_store(store)
    if host not in LOOPBACK:
        err_console().print(
            f"[yellow]warning:[/] serving on {host}: anyone who can reach it reads the store"
        )
    port = port or _free_port(host)  # chosen now, so the address printed is the one served
    import secrets

    token = secrets.token_urlsafe(24)
    hosts = {*LOOPBACK, *([] if host in ("0.0.0.0", "::") else [host]), *(allow_host or [])}
    shown = f"[{host}]" if ":" in host else host
    err_console().print(
        f"harnessctl view on http://{shown}:{port}/?token={token} (Ctrl-C stops it)",
        soft_wrap=True,
    )
    app = create_app(db, ws, token=token, hosts=hosts)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def _free_port(host: str) -> int:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
