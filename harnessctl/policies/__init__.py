"""Policies: the models a harness talks to through the gateway.

Real models are plain litellm model strings (``openai/gpt-4o-mini``...). Offline policies are
TEST DOUBLES, never models: ``sim/<name>`` (simulated agents with seeded failure modes) and
``replay/<kind>`` (answers with the gold of any environment, to check it end to end). They are
served by litellm *custom providers* (:mod:`.offline`), so the gateway calls them through
exactly the same ``litellm.completion`` path as a real model.

Offline policies are plugins of one registry (:data:`OFFLINE_POLICIES`, entry point group
``harnessctl.policies``): a name ``sim/x`` or ``replay/x`` maps to a class with ``view(env,
task)`` (the host-only view of the task it needs: the environment's oracle, the replay
script...) and ``reply(view, messages, seed, params, tools)``. A rollout hands a task's view
over only when its policy is offline (:func:`offline_channel`): a real model's rollout never
copies gold anywhere.

This module stays import-light: litellm is only touched inside :func:`register_providers`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from ..errors import ConfigError
from ..registry import Registry

PROVIDERS = ("sim", "replay")
SIM_PROVIDER = "sim"


class OfflineParamError(ValueError):
    """An offline policy was given a parameter it does not take (answered as HTTP 400)."""


class OfflinePolicy(Protocol):
    """An offline test-double policy (see the module docstring)."""

    description: str

    def view(self, env: Any, task: Any) -> dict[str, Any]:
        """What the policy needs to know about ``task`` (host only; may hold gold)."""
        ...

    def reply(
        self,
        view: dict[str, Any],
        messages: list[Any],
        seed: int,
        params: dict[str, Any],
        tools: list[dict[str, Any]],
    ) -> str | dict[str, Any]:
        """The reply text, or ``{"content": str | None, "tool_calls": [{"name", "arguments"}]}``."""
        ...


OFFLINE_POLICIES: Registry[OfflinePolicy] = Registry(
    "harnessctl.policies",
    "offline policy",
    {
        "sim/dbbench": "harnessctl.policies.dbbench_sim:SimDBBench",
        "sim/alfworld": "harnessctl.envs.alfworld.sim:SimAlfworld",
        "replay": "harnessctl.policies.replay:ReplayPolicy",
    },
    option="--policy",
)

# Shown by ``--help``: name -> one line (plugins add theirs through the registry).
OFFLINE_PROVIDERS: dict[str, str] = {
    "sim/dbbench": (
        "TEST DOUBLE, not a model: oracle-backed simulated DBBench agent with seeded, "
        "harness-sensitive failure modes (offline, free, deterministic; params: skill, rate_<mode>)"
    ),
    "sim/alfworld": (
        "TEST DOUBLE, not a model: walkthrough-backed simulated ALFWorld player with seeded, "
        "harness-sensitive failure modes (offline, free, deterministic; params: skill, "
        "rate_<mode>)"
    ),
    "replay/<kind>": (
        "TEST DOUBLE, not a model: answers every task of environment <kind> with its gold "
        "(e.g. replay/dbbench: the reference SQL, then the label), to check an environment "
        "end to end through the whole rollout path"
    ),
}


def unit_param(params: Mapping[str, Any], key: str, default: float) -> float:
    """A parameter in [0, 1] (a skill or a rate); ``OfflineParamError`` otherwise."""
    raw = params.get(key, default)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise OfflineParamError(f"param {key}={raw!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise OfflineParamError(f"param {key}={value} must be between 0 and 1")
    return value


def sim_params(
    params: Mapping[str, Any], modes: tuple[str, ...], default_skill: float
) -> tuple[float, dict[str, float]]:
    """The simulated policies' parameter convention: ``skill`` in [0, 1] and ``rate_<mode>``
    overrides for the policy's failure ``modes``; an unknown ``rate_`` is refused."""
    overrides: dict[str, float] = {}
    for key in params:
        if not key.startswith("rate_"):
            continue
        mode = key.removeprefix("rate_")
        if mode not in modes:
            raise OfflineParamError(f"unknown param {key}; failure modes are: {', '.join(modes)}")
        overrides[mode] = unit_param(params, key, 0.0)
    return unit_param(params, "skill", default_skill), overrides


def default_policy(env_kind: str) -> str:
    """The offline default for an environment: its simulated test double ``sim/<kind>``."""
    name = f"{SIM_PROVIDER}/{env_kind}"
    if not OFFLINE_POLICIES.has(name):
        raise ConfigError(
            "--policy",
            f"no policy given and environment {env_kind!r} has no offline simulated policy "
            f"({name}): pass --policy MODEL (any litellm model string, or replay/{env_kind})",
        )
    return name


def is_offline(model: str) -> bool:
    """Whether ``model`` names an offline test double (``sim/...`` or ``replay/...``)."""
    return model.split("/", 1)[0] in PROVIDERS


def get_offline_policy(model: str) -> OfflinePolicy:
    """The offline policy named ``model``; ``replay/<kind>`` works for every environment."""
    provider, _, name = model.partition("/")
    if provider == "replay" and name:
        return OFFLINE_POLICIES.get("replay")(name)
    return OFFLINE_POLICIES.create(model)


def offline_version(model: str) -> str:
    """The code version of an offline policy, for the cache key ("" for a real model): its
    ``version`` attribute, else a hash of the source files of the module defining it, so a
    changed simulator never serves rollouts cached under its old behaviour."""
    if not is_offline(model):
        return ""
    policy = get_offline_policy(model)
    version = getattr(policy, "version", None)
    if not version:
        import hashlib
        import inspect

        module = inspect.getmodule(type(policy))
        path = inspect.getsourcefile(module) if module is not None else None
        data = open(path, "rb").read() if path else repr(type(policy)).encode()  # noqa: SIM115
        version = hashlib.sha256(data).hexdigest()[:12]
    return f"{model}:{version}"


@contextlib.contextmanager
def offline_channel(model: str, rollout_id: str, env: Any, task: Any) -> Iterator[None]:
    """While a rollout of an offline policy runs, make the task's view reachable by rollout id
    (:mod:`.oracle`); for any other model, nothing is computed or kept."""
    if not is_offline(model):
        yield
        return
    from . import oracle

    view = get_offline_policy(model).view(env, task)
    with oracle.registered(rollout_id, view):
        yield


def register_providers(litellm_module: Any) -> None:
    """Add the offline providers to ``litellm_module.custom_provider_map`` (idempotent).

    Takes the litellm module as an argument so the caller decides when the ~4 s import happens.
    Also registers the built-in offline models with a zero price, so litellm's cost tracking
    reports 0 instead of failing on an unknown model.
    """
    from .offline import OfflineProvider, model_info

    current = list(getattr(litellm_module, "custom_provider_map", None) or [])
    have = {entry.get("provider") for entry in current}
    for provider in PROVIDERS:
        if provider not in have:
            current.append({"provider": provider, "custom_handler": OfflineProvider(provider)})
    litellm_module.custom_provider_map = current
    names = [n for n in OFFLINE_POLICIES.names() if "/" in n]
    litellm_module.register_model(model_info(names))


__all__ = [
    "OFFLINE_POLICIES",
    "OFFLINE_PROVIDERS",
    "SIM_PROVIDER",
    "OfflineParamError",
    "OfflinePolicy",
    "default_policy",
    "get_offline_policy",
    "is_offline",
    "offline_channel",
    "offline_version",
    "register_providers",
    "sim_params",
    "unit_param",
]
