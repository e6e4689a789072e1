"""The harness runtime: the only harnessctl code that runs inside the sandbox.

Standard library only, relative imports only: in the sandbox this package is importable as
``harnessctl_runtime`` (harness code writes ``from harnessctl_runtime import Harness``), on
the host as ``harnessctl.runtime``. It runs the agent loop of one harness on one task, talks
to the model only through the host gateway, and leaves ``result.json`` and ``events.jsonl``
in the task directory for the host to score.
"""

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
