"""Checks of an evaluation's request before anything runs: a run that cannot mean what was
asked is refused (exit 2, the option named) instead of running and summarising nothing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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
    own = getattr(policy, "param_names", None)  # optional: a plugin may not declare them
    if callable(own):
        mine = sorted({*own(), RESAMPLE})
        unknown = sorted(k for k in params if k not in {*mine, *CALL_PARAMS})
        if unknown:
            raise ConfigError(
                "--param",
                f"{model} takes no parameter {', '.join(unknown)}"
                f"{did_you_mean(unknown[0], mine)} (its parameters: {', '.join(mine)}; "
                "and a chat call's own, such as temperature or max_tokens)",
            )
    rates = getattr(policy, "rates", None)
    if callable(rates):
        try:
            rates(params)
        except OfflineParamError as exc:
            raise ConfigError("--param", f"{model}: {exc}") from None


#: Parameters of an OpenAI-style chat call, and the value each takes (checked offline).
_UNIT = (0.0, 1.0)
_NUMBER_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": _UNIT,
    "min_p": _UNIT,
    "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0),
    "repetition_penalty": (0.0, 10.0),
}
_POSITIVE_INTS = ("max_tokens", "max_completion_tokens", "n", "top_logprobs", "top_k")
_ANY_INTS = ("seed",)
#: Names a call also takes that are not sampling parameters: litellm's call arguments and
#: the OpenAI-compatible servers' extensions harnessctl uses (vLLM's token ids).
_OTHER_KNOWN = (
    "api_base",
    "api_key",
    "api_version",
    "base_url",
    "timeout",
    "num_retries",
    "stop",
    "logprobs",
    "logit_bias",
    "response_format",
    "reasoning_effort",
    "tool_choice",
    "parallel_tool_calls",
    "extra_headers",
    "extra_body",
    "user",
    "return_token_ids",
    "organization",
)


#: Every name a chat call itself takes: what an offline policy may be passed besides its own.
CALL_PARAMS = frozenset({*_NUMBER_RANGES, *_POSITIVE_INTS, *_ANY_INTS, *_OTHER_KNOWN})


def check_model_params(
    model: str,
    params: dict,
    secrets: dict | None = None,
    *,
    option: str = "--param",
    own: tuple[str, ...] = (),
) -> None:
    """A real model's ``--param`` values checked before anything runs, offline: the common
    sampling parameters' types and ranges (temperature in [0, 2], top_p in [0, 1],
    max_tokens a positive integer...), and a name one or two letters from a known one
    (``temprature``) refused as the typo it is, the known names listed: OpenAI-compatible
    servers such as vLLM ignore a field they do not know, so the run would go on without it.
    Other names pass to the provider, whose preflight call judges them (litellm forwards a
    provider's own parameters as they are: there is no closed list to hold them to).
    ``secrets`` (names that look like credentials) are checked by name only: their values are
    never shown. ``option`` is the flag reported; ``own`` names the caller's own parameters
    that are known too (an LLM editor's ``edit_format``)."""
    from ..policies import is_offline

    if is_offline(model):
        return
    known = (*own, *_NUMBER_RANGES, *_POSITIVE_INTS, *_ANY_INTS, *_OTHER_KNOWN)
    hidden = secrets or {}
    for name, value in {**params, **hidden}.items():
        problem = None if name in hidden else _param_problem(name, value)
        if problem is None and name not in known:
            hint = did_you_mean(name, known)
            if hint:
                listed = ", ".join(sorted(known))
                problem = (
                    f"unknown parameter {name!r}{hint} (known here: {listed}; a name far from "
                    "all of them goes to the provider as it is)"
                )
        if problem:
            raise ConfigError(option, f"{model}: {problem}")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the known name closest to ``name`` (a typo's one or two
    letters), else ``""``: the hint of every refused parameter name."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.8)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_param_names(
    option: str, who: str, params: Mapping[str, Any], known: Iterable[str]
) -> None:
    """Every name in ``params`` must be one of ``known`` (the parameters ``who`` reads): an
    unknown one is a ``ConfigError`` naming ``option``, the parameter, the closest known
    name and all of them, before anything runs. A misspelt name would otherwise be ignored
    and the run would go on without the setting the person asked for."""
    names = sorted(set(known))
    unknown = sorted(k for k in params if k not in names)
    if not unknown:
        return
    first = unknown[0]
    listed = f"its parameters: {', '.join(names)}" if names else "it takes none"
    raise ConfigError(
        option,
        f"unknown {who} parameter {', '.join(repr(k) for k in unknown)}"
        f"{did_you_mean(first, names)} ({listed})",
    )


def _param_problem(name: str, value: object) -> str | None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if name in _NUMBER_RANGES:
        low, high = _NUMBER_RANGES[name]
        if not number or not low <= value <= high:  # type: ignore[operator]
            return f"{name}={value!r} is not a number in [{low:g}, {high:g}]"
    elif name in _POSITIVE_INTS:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return f"{name}={value!r} is not an integer >= 1"
    elif name in _ANY_INTS and (not isinstance(value, int) or isinstance(value, bool)):
        return f"{name}={value!r} is not an integer"
    return None
