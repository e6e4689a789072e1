"""tau2's natural-language assertions judged by a model through the episode's model access.

tau2 judges a task's ``nl_assertions`` with its own ``NLAssertionsEvaluator``: its prompt (the
conversation and the expected outcomes), one call of tau2's ``generate`` with tau2's default
judge model, its parsing of the JSON verdicts. harnessctl keeps all of that and replaces only
where the call goes: ``env_options: {judge: <litellm model>}`` sends it through the rollout's
:class:`harnessctl.envs.ModelAccess` (recorded as ``env:judge`` with its cost, outside the
agent's budget, the key in ``judge_params`` never stored).

The replacement is installed once in tau2's evaluator module (:func:`install`); it sends a call
to the judge bound to the current context (:func:`judged_by`, a ``ContextVar``, so concurrent
rollouts on threads each reach their own episode's access) and refuses a call made with no
judge bound, rather than reaching tau2's default provider from the host.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

#: The judge of the current context: tau2 messages in, tau2's ``AssistantMessage`` out.
JudgeFn = Callable[[list[Any]], Any]

_CURRENT: ContextVar[JudgeFn | None] = ContextVar("harnessctl_tau2_judge", default=None)
_INSTALLED = threading.Lock()
_MARK = "_harnessctl_judge"


class JudgeError(RuntimeError):
    """The judge model's answer is not the verdicts tau2 asked for (an infrastructure error
    of the rollout: the harness is not at fault)."""


def _routed_generate(model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
    judge = _CURRENT.get()
    if judge is None:
        raise JudgeError(
            "tau2 asked a judge model for a verdict with none given (env_options: judge)"
        )
    return judge(messages)


def install() -> None:
    """Route tau2's NL-assertion judge call through :func:`judged_by` (idempotent)."""
    from tau2.evaluator import evaluator_nl_assertions as module

    with _INSTALLED:
        if not getattr(module.generate, _MARK, False):
            setattr(_routed_generate, _MARK, True)
            module.generate = _routed_generate


@contextlib.contextmanager
def judged_by(judge: JudgeFn) -> Iterator[None]:
    """tau2's judge calls made in this context go to ``judge``."""
    install()
    token = _CURRENT.set(judge)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def model_judge(access: Any, model: str, params: dict[str, Any]) -> JudgeFn:
    """A judge calling ``model`` through ``access`` (purpose ``judge``) with ``params``."""
    from tau2.utils.llm_utils import to_litellm_messages

    from .package import tau2

    def judge(messages: list[Any]) -> Any:
        reply = access.complete(
            to_litellm_messages(messages), purpose="judge", model=model, **params
        )
        return tau2().AssistantMessage(
            role="assistant", content=reply.content or "", cost=reply.cost_usd
        )

    return judge


def verdicts(nl_assertions: list[Any] | None) -> list[dict[str, Any]]:
    """tau2's ``NLAssertionCheck`` list as plain dicts for the score's detail."""
    return [
        {"assertion": c.nl_assertion, "met": bool(c.met), "justification": c.justification}
        for c in nl_assertions or []
    ]
