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
from pathlib import Path
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
        "sim/dbbench": "harnessctl.envs.dbbench.sim:SimDBBench",
        "sim/alfworld": "harnessctl.envs.alfworld.sim:SimAlfworld",
        "sim/miniwob": "harnessctl.envs.miniwob.sim:SimMiniwob",
        "replay/miniwob": "harnessctl.envs.miniwob.replay:ReplayMiniwob",
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
    "sim/miniwob": (
        "TEST DOUBLE, not a model: scripted MiniWoB++ web agent with seeded, harness-sensitive "
        "failure modes (offline, free, deterministic; params: skill, rate_<mode>)"
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


def scaled_rates(
    base_rates: Mapping[str, float], skill: float, overrides: Mapping[str, float] | None = None
) -> dict[str, float]:
    """The simulated policies' rate convention: each mode's base rate scaled by
    ``2 * (1 - skill)`` and clipped to [0, 1] (skill 0.5: the base rates; 1: no failure);
    ``rate_<mode>`` overrides win unscaled."""
    scale = 2.0 * (1.0 - skill)
    rates = {m: min(1.0, max(0.0, rate * scale)) for m, rate in base_rates.items()}
    rates.update(overrides or {})
    return rates


class OracleSim:
    """Base of an oracle-backed simulated policy plugin: its view of a task is the
    environment's ``oracle``, and :meth:`rates` reads ``skill`` and ``rate_<mode>`` by the
    convention of :func:`sim_params` and :func:`scaled_rates`. A subclass sets ``base_rates``
    (mode -> rate at skill 0.5), ``default_skill`` and ``description``, and writes ``reply``."""

    description = ""
    base_rates: Mapping[str, float] = {}
    default_skill = 0.5

    def view(self, env: Any, task: Any) -> dict[str, Any]:
        return dict(env.oracle(task))

    def rates(self, params: Mapping[str, Any]) -> dict[str, float]:
        skill, overrides = sim_params(params, tuple(self.base_rates), self.default_skill)
        return scaled_rates(self.base_rates, skill, overrides)

    def param_names(self) -> tuple[str, ...]:
        """The parameters this policy reads: ``skill`` and one ``rate_<mode>`` per mode
        (checked by name before any rollout: a misspelt one is refused, not ignored)."""
        return ("skill", *(f"rate_{mode}" for mode in self.base_rates))


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
    """The offline policy named ``model``; ``replay/<kind>`` works for every environment
    (an environment whose gold needs the episode's observations registers its own
    ``replay/<kind>``, which then wins over the generic one)."""
    provider, _, name = model.partition("/")
    if provider == "replay" and name:
        if model in OFFLINE_POLICIES.names():
            return OFFLINE_POLICIES.create(model)
        return OFFLINE_POLICIES.get("replay")(name)
    return OFFLINE_POLICIES.create(model)


def offline_version(model: str) -> str:
    """The code version of an offline policy, for the cache key ("" for a real model): its
    ``version`` attribute, else a hash of the sources of every module its behaviour comes
    from (:func:`source_closure`), so a changed simulator, or a changed helper it uses, never
    serves rollouts cached under its old behaviour."""
    if not is_offline(model):
        return ""
    policy = get_offline_policy(model)
    version = getattr(policy, "version", None)  # an optional member of the plugin's own
    if not version:
        import hashlib

        digest = hashlib.sha256()
        for name, path in source_closure(type(policy).__module__):
            digest.update(name.encode() + b"\0" + path.read_bytes())
        version = digest.hexdigest()[:12]
    return f"{model}:{version}"


def _locate(name: str) -> Path | None:
    """The source file of module ``name``, found on disk without importing anything (a
    package's ``__init__`` would run, and reading a cache key must not import litellm)."""
    import importlib.util

    top, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin)
    for part in rest:
        if path.name != "__init__.py":
            return None  # a name inside a module, not a submodule
        candidates = (path.parent / f"{part}.py", path.parent / part / "__init__.py")
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            return None
        path = found
    return path if path.suffix == ".py" else None


def source_closure(module_name: str) -> list[tuple[str, Path]]:
    """The module ``module_name`` and every module it imports, transitively, at the top or
    inside a function (read from the source), that belongs to its own package or to the
    generic simulated-policy helpers (this package), sorted by name. The standard library,
    third-party packages and the rest of harnessctl are left out: they are not the policy."""
    import ast
    import importlib.util

    own = module_name.rsplit(".", 1)[0] if "." in module_name else module_name

    def in_scope(name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in (own, __name__))

    seen: dict[str, Path] = {}
    todo = [module_name]
    while todo:
        name = todo.pop()
        if name in seen or not in_scope(name):
            continue
        path = _locate(name)
        if path is None:
            continue
        seen[name] = path
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(seen[name].read_bytes())):
            if isinstance(node, ast.Import):
                todo.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                todo.append(base)
                # ``from pkg import submodule`` names a module too
                todo.extend(f"{base}.{alias.name}" for alias in node.names)
    return [(n, seen[n]) for n in sorted(seen)]


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
