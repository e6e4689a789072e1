"""Checks of an evaluation's request before anything runs: a run that cannot mean what was
asked is refused (exit 2, the option named) instead of running and summarising nothing."""

from __future__ import annotations

from ..errors import ConfigError


def check_task_ids(wanted: list[str], known: list[str], split: str) -> None:
    """Every ``--task`` id must be a task of the split: an unknown one (a typo, another
    split's id) would otherwise select nothing and the run would end with nothing to
    summarise."""
    have = set(known)
    unknown = [t for t in dict.fromkeys(wanted) if t not in have]
    if not unknown:
        return
    listed = ", ".join(sorted(have)[:8]) + (", ..." if len(have) > 8 else "")
    raise ConfigError(
        "--task",
        f"no task {', '.join(repr(t) for t in unknown)} in split {split!r} "
        f"({len(have)} tasks: {listed or 'none'})",
    )


def check_policy_environment(model: str, env_kind: str) -> None:
    """An offline test double made for another environment (``sim/alfworld`` on a DBBench
    suite, ``replay/toy`` on ALFWorld) is refused: its view of a task would be built from the
    wrong environment's data. ``sim/<name>`` and ``replay/<name>`` name their environment when
    ``<name>`` is a registered environment kind; a plugin's test double named otherwise is
    not judged here."""
    from ..envs import ENVIRONMENTS
    from ..policies import is_offline

    if not is_offline(model):
        return
    _, _, name = model.partition("/")
    if name and name != env_kind and ENVIRONMENTS.has(name):
        raise ConfigError(
            "--policy",
            f"{model} is the test double of environment {name!r}, but this suite's "
            f"environment is {env_kind!r} (use sim/{env_kind} or replay/{env_kind})",
        )


def check_policy_params(model: str, params: dict) -> None:
    """An offline simulated policy's own parameters checked before any rollout: ``skill``
    and ``rate_<mode>`` in [0, 1], no ``rate_`` of a mode it does not have, ``resample`` a
    non-negative integer; ``ConfigError`` naming ``--param`` (before, the first rollout
    found it and every rollout failed on it). A real model's parameters are the provider's
    to judge: the preflight call makes it."""
    from ..policies import OfflineParamError, get_offline_policy, is_offline
    from ..policies.serve import RESAMPLE, valid_resample

    if not is_offline(model):
        return
    resample = params.get(RESAMPLE, 0)
    if not valid_resample(resample):
        raise ConfigError("--param", f"{model}: {RESAMPLE}={resample!r} is not an integer >= 0")
    try:
        policy = get_offline_policy(model)
    except Exception:  # an unknown name is the policy check's to report
        return
    rates = getattr(policy, "rates", None)
    if callable(rates):
        try:
            rates(params)
        except OfflineParamError as exc:
            raise ConfigError("--param", f"{model}: {exc}") from None
