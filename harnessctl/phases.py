"""What a slow step of the library is doing, for whoever shows it (issue #56).

Library code never prints. Around a step that can take seconds before anything else happens
(importing an environment's package, loading its tasks or world, reading the store) it names
the step::

    with phase("importing tau2-bench's package (tau2, litellm)"):
        import tau2

A listener (the CLI's status line, :mod:`harnessctl.cli.progress`) gets the stack of steps in
progress, outermost first, each time it changes; without one a phase costs two ContextVar
operations. The listener and the stack live in a ``ContextVar``, as tau2's judge does
(:mod:`harnessctl.envs.tau2.judge`), so two commands in one process (a test runner) do not
mix. A thread the library starts does not inherit them: a phase there is shown by nobody,
which is why the steps worth naming (a suite's tasks, an environment's package) run before
the rollouts' worker threads start, and the rollout progress covers the time after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Listener = Callable[[tuple[str, ...]], None]
"""Called with the steps in progress, outermost first (empty: none), on every change."""

_LISTENER: ContextVar[Listener | None] = ContextVar("harnessctl_phase_listener", default=None)
_STACK: ContextVar[tuple[str, ...]] = ContextVar("harnessctl_phase_stack", default=())


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send the phases of the code run inside to ``listener`` (the enclosing listener, if
    any, gets them again after)."""
    token = _LISTENER.set(listener)
    stack = _STACK.set(())
    try:
        yield
    finally:
        _STACK.reset(stack)
        _LISTENER.reset(token)


@contextmanager
def phase(text: str) -> Iterator[None]:
    """Name the step the code inside performs (``text``: what it loads or waits for, in
    words, e.g. "loading the tasks of suite tau2"). A listener's error is not the step's:
    it propagates, as any bug would."""
    listener = _LISTENER.get()
    if listener is None:
        yield
        return
    outer = _STACK.get()
    token = _STACK.set((*outer, text))
    listener((*outer, text))
    try:
        yield
    finally:
        _STACK.reset(token)
        listener(outer)


def current() -> tuple[str, ...]:
    """The steps in progress in this context, outermost first."""
    return _STACK.get()


__all__ = ["Listener", "current", "listening", "phase"]
