"""``harnessctl view``: a local, read-only web viewer over the store.

A Starlette application (:func:`app.create_app`) served by uvicorn: a JSON API of GET
routes over the store (:mod:`.data`) and one static page whose script renders it with DOM
text nodes only (every harness and model text is untrusted: it is never parsed as HTML).
Runs, rollouts with filters, each trajectory with every model call, tool call and
environment step, the evolution lineage and the profiles; the page polls, so a run that is
writing shows its new rollouts as they land. Optional extra: ``pip install 'harnessctl[view]'``.
"""

from __future__ import annotations

LOOPBACK = ("127.0.0.1", "localhost", "::1")
