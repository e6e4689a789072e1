"""The contract between the host and the sandboxed runtime, defined once for both sides.

Standard library only: the runtime imports it as ``harnessctl_runtime.wire`` inside the
sandbox, the host as ``harnessctl.runtime.wire`` (``harnessctl.constants`` re-exports the
variable names, the gateway its paths, ``harnessctl.envs`` the step shape). A change here
changes the runtime's source hash, so every cached rollout is re-run once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# --- environment variables the host sets for the runtime -----------------------------------
ENV_GATEWAY = "HXRT_GATEWAY"  # unix:///path/to/socket or http://127.0.0.1:PORT
ENV_TOKEN = "HXRT_TOKEN"  # per-rollout capability token for the gateway (not a secret key)
ENV_TOKEN_FILE = "HXRT_TOKEN_FILE"  # a file holding the token, read once and removed
ENV_MANIFEST = "HXRT_MANIFEST"  # the harness manifest (JSON)
ENV_LIMITS = "HXRT_LIMITS"  # JSON: rlimits the runtime applies to itself before harness code
ENV_ENV = "HXRT_ENV"  # JSON: the environment binding (surface, tools or sandbox package)
ENV_ENV_PATH = "HXRT_ENV_PATH"  # where an in-sandbox environment's package is importable
ENV_HARNESS_DIR = "HXRT_HARNESS_DIR"  # the harness tree, read only
ENV_TASK_DIR = "HXRT_TASK_DIR"  # the task directory, the only writable place

# --- gateway routes -------------------------------------------------------------------------
CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
RESET_PATH = "/v1/env/reset"
STEP_PATH = "/v1/env/step"
STEP_BUDGET_EXCEEDED = "step_budget_exceeded"  # the error code of a step past the budget


@dataclass
class StepResult:
    """One answer of a host-served episode, the same object from the environment's ``step``
    to the harness: the observation text, whether the episode ended, and public information
    (e.g. the admissible commands). ``info["error"]`` marks an action the environment
    rejected. Everything here reaches the harness, so it must hold nothing gold."""

    observation: str
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        """The JSON body the gateway answers a reset or step with."""
        return {"observation": self.observation, "done": self.done, "info": self.info}

    @classmethod
    def from_wire(cls, data: Any) -> StepResult:
        """Read an answer defensively (the runtime's side): wrong types become defaults."""
        data = data if isinstance(data, dict) else {}
        info = data.get("info")
        return cls(
            observation=str(data.get("observation") or ""),
            done=bool(data.get("done")),
            info=info if isinstance(info, dict) else {},
        )
