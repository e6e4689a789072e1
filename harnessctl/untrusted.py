"""What the sandbox left, read as data: ``result.json`` and ``events.jsonl`` are written by
untrusted code, so a malformed one is the harness's error (``harness_error``, with a message
naming the file and field), never a host crash.

The bytes are read by :func:`harnessctl.run.session.read_untrusted` (no links, no FIFOs, bounded
sizes); this module checks what they hold.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .bounds import MAX_JSON_DEPTH, MAX_RESULT_BYTES, loads_untrusted
from .records import RuntimeResult

MAX_COUNTER = 2**31 - 1
"""The largest ``rounds`` / ``tool_error_streak`` the host stores."""


def checked_result(raw: bytes | None, present: bool) -> tuple[dict[str, Any] | None, str | None]:
    """``result.json`` as a checked mapping, or None and why (None, None: there is none).

    ``raw`` is its bytes (None when missing, not a regular file or over the size bound);
    ``present`` says whether a file of that name exists at all.
    """
    if raw is None:
        if not present:
            return None, None
        return None, (
            f"result.json is not a regular file of at most {MAX_RESULT_BYTES} bytes (refused)"
        )
    try:
        data = loads_untrusted(raw)
    except ValueError as exc:
        return None, f"result.json is not JSON nested at most {MAX_JSON_DEPTH} deep: {exc}"[:500]
    if not isinstance(data, dict):
        return None, "result.json must hold a JSON object"
    if not isinstance(data.get("status"), str):
        return None, "result.json: field 'status' must be a string"
    try:
        result = RuntimeResult.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "?"
        return None, f"result.json: field {where!r}: {first['msg']}"[:500]
    for name in ("rounds", "tool_error_streak"):
        value = getattr(result, name)
        if not 0 <= value <= MAX_COUNTER:
            return None, f"result.json: field {name!r} must be 0..{MAX_COUNTER}, not {value}"
    checked = {k: v for k, v in data.items() if k not in RuntimeResult.model_fields}
    return {**checked, **result.model_dump()}, None


def parse_events(raw: bytes | None) -> list[dict[str, Any]]:
    """The runtime's event log: one JSON object per line; lines that are not one (or nest
    deeper than ``MAX_JSON_DEPTH``) are dropped."""
    if raw is None:
        return []
    events = []
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            item = loads_untrusted(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            events.append(item)
    return events
