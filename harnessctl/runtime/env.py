"""Host-served environments, seen from the sandbox: reset and step through the gateway.

A host-served environment's episode (a simulator, a domain database, a task container) lives
on the host; the harness reaches it over the rollout's gateway socket with the rollout's
token, exactly as it reaches the model. Gold and simulator state never leave the host; every
step is recorded there. Standard library only.
"""

from __future__ import annotations

import json
from typing import Any

from .client import GatewayClient, GatewayError
from .wire import RESET_PATH, STEP_BUDGET_EXCEEDED, STEP_PATH, StepResult


class EnvError(Exception):
    """The environment or the gateway failed (an infrastructure error, not the harness's)."""


class StepLimit(Exception):
    """The rollout's environment step budget is spent; the step was not taken."""


class StepRefused(Exception):
    """The environment refused the request itself (malformed action)."""


class EnvClient:
    """``reset()`` and ``step()`` of this rollout's host-served episode."""

    def __init__(self, gateway: GatewayClient) -> None:
        self.gateway = gateway

    @classmethod
    def from_env(cls) -> EnvClient:
        return cls(GatewayClient.from_env())

    def _post(self, path: str, body: dict[str, Any]) -> StepResult:
        try:
            status, payload = self.gateway._request("POST", path, body)
        except GatewayError as exc:
            raise EnvError(str(exc)) from exc
        try:
            data = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            data = {}
        data = data if isinstance(data, dict) else {}
        if status != 200:
            found = data.get("error")
            error: dict[str, Any] = found if isinstance(found, dict) else {}
            text = f"HTTP {status} ({error.get('code')}): {error.get('message') or ''}"
            if status == 400 and error.get("code") == STEP_BUDGET_EXCEEDED:
                raise StepLimit(text)
            if 400 <= status < 500:
                raise StepRefused(text)
            raise EnvError(text)
        return StepResult.from_wire(data)

    def reset(self) -> StepResult:
        """Start (or restart) the episode; the first observation."""
        return self._post(RESET_PATH, {})

    def step(
        self, tool: str, argument: str = "", arguments: dict[str, Any] | None = None
    ) -> StepResult:
        """Take one action: ``tool`` with a text ``argument`` or function-call ``arguments``."""
        body: dict[str, Any] = {"tool": tool, "argument": argument}
        if arguments is not None:
            body["arguments"] = arguments
        return self._post(STEP_PATH, body)


class HostTool:
    """One of a host-served environment's actions, used like any tool: ``run(argument)``."""

    def __init__(self, name: str, client: EnvClient, observation_cls: type) -> None:
        self.name, self.client, self._observation = name, client, observation_cls
        self.last: StepResult | None = None

    def _wrap(self, result: StepResult, limit: int) -> Any:
        self.last = result
        text = result.observation
        if limit and len(text) > limit:
            text = text[:limit] + " ...[cut]"
        ok = not result.info.get("error")
        return self._observation(text=text, ok=ok, payload=result.info, done=result.done)

    def run(self, argument: str, limit: int = 0) -> Any:
        """Send ``argument`` as this tool's action; the observation (``done`` ends the loop)."""
        try:
            result = self.client.step(self.name, argument)
        except StepRefused as exc:
            return self._observation(text=str(exc), ok=False, payload={"error": str(exc)})
        return self._wrap(result, limit)

    def run_call(self, arguments: dict[str, Any], limit: int = 0) -> Any:
        """The same action as a function call with JSON ``arguments``."""
        try:
            result = self.client.step(self.name, arguments=arguments)
        except StepRefused as exc:
            return self._observation(text=str(exc), ok=False, payload={"error": str(exc)})
        return self._wrap(result, limit)

    def close(self) -> None:
        pass
