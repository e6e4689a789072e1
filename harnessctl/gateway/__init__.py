"""The host-side model gateway: the sandbox's only way to reach a model.

Importing this package is light; litellm is imported on the first model call
(:func:`harnessctl.gateway.llm.get_litellm`).
"""

from __future__ import annotations

from .ledger import Budget, CallRecord, RolloutLedger
from .llm import Completion, ContextWindowError, ModelRequestError, UpstreamError, complete
from .server import Completer, Gateway

__all__ = [
    "Budget",
    "CallRecord",
    "Completer",
    "Completion",
    "ContextWindowError",
    "Gateway",
    "ModelRequestError",
    "RolloutLedger",
    "UpstreamError",
    "complete",
]
