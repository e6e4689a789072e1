"""The harness runtime: the only harnessctl code that runs inside the sandbox.

Standard library only, relative imports only: in the sandbox this package is importable as
``harnessctl_runtime`` (harness code writes ``from harnessctl_runtime import Harness``), on
the host as ``harnessctl.runtime``. It runs the agent loop of one harness on one task, talks
to the model only through the host gateway, and leaves ``result.json`` and ``events.jsonl``
in the task directory for the host to score.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import ModelReply, ToolCall
    from .harness import (
        Action,
        Failure,
        Harness,
        Observation,
        Recovery,
        State,
        Turn,
        function_tool,
    )

# Loaded on first use (PEP 562), so that the host's import of the wire contract
# (``harnessctl.runtime.wire``, by every command) does not import the HTTP client.
_LAZY = {
    "ModelReply": ".client",
    "ToolCall": ".client",
    **{
        name: ".harness"
        for name in (
            "Action",
            "Failure",
            "Harness",
            "Observation",
            "Recovery",
            "State",
            "Turn",
            "function_tool",
        )
    },
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PROTOCOL_VERSION = "1"

__all__ = [
    "PROTOCOL_VERSION",
    "Action",
    "Failure",
    "Harness",
    "ModelReply",
    "Observation",
    "Recovery",
    "State",
    "ToolCall",
    "Turn",
    "function_tool",
]
