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
    store: StoreOption = None,
) -> None:
    """Serve a read-only web viewer over the store: runs, rollouts with filters, each
    trajectory with every model call, tool call and environment step, the evolution lineage
    and the profiles. The page polls, so a running eval's new rollouts appear as they land.
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
    if port == 0:  # pick one now, so the address printed is the one served
        import socket

        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
    err_console().print(f"harnessctl view on http://{host}:{port}/ (Ctrl-C stops it)")
    uvicorn.run(create_app(db, ws), host=host, port=port, log_level="warning")
