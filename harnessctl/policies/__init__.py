"""Policies: the models a harness talks to through the gateway.

Real models are plain litellm model strings (``openai/gpt-4o-mini``...). Offline policies are
litellm *custom providers* registered here, so the gateway calls them through exactly the same
``litellm.completion`` path; nothing else special-cases them.

This module stays import-light: litellm is only touched inside :func:`register_providers`,
which imports the provider module lazily.
"""

from __future__ import annotations

from typing import Any

SIM_PROVIDER = "sim"

# Shown by ``--help`` and ``harnessctl policies``: name -> one line.
OFFLINE_PROVIDERS: dict[str, str] = {
    "sim/dbbench": (
        "TEST DOUBLE, not a model: oracle-backed simulated DBBench agent with seeded, "
        "harness-sensitive failure modes (offline, free, deterministic; params: skill, rate_<mode>)"
    ),
}


def register_providers(litellm_module: Any) -> None:
    """Add the offline providers to ``litellm_module.custom_provider_map`` (idempotent).

    Takes the litellm module as an argument so the caller decides when the ~4 s import happens.
    Also registers the offline models with a zero price, so litellm's cost tracking reports 0
    instead of failing on an unknown model.
    """
    from .sim import MODEL_INFO, SimProvider

    current = list(getattr(litellm_module, "custom_provider_map", None) or [])
    if any(entry.get("provider") == SIM_PROVIDER for entry in current):
        return
    current.append({"provider": SIM_PROVIDER, "custom_handler": SimProvider()})
    litellm_module.custom_provider_map = current
    litellm_module.register_model(MODEL_INFO)


__all__ = ["OFFLINE_PROVIDERS", "SIM_PROVIDER", "register_providers"]
