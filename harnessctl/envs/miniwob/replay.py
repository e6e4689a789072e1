"""``replay/miniwob``: a TEST DOUBLE that solves every task of the suite with its gold.

A MiniWoB++ page draws its problem when the episode starts, so the gold is no fixed script:
this policy reads the latest page the harness showed and the actions it already took (its
own replies, :mod:`.play`) and answers the next action of the task's scripted solution
(:mod:`.gold`), in the text protocol or, when the request offers the environment's
functions, as a function call. Where the solution knows no next action (a task outside the
suite, a page it cannot read) it says so without an action.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harnessctl.policies.sim_signals import offered_functions

from .gold import solve
from .play import as_call, latest_observation, read_history, taken, text_reply

GIVE_UP = "Think: I have no scripted step for this page."


def next_reply(task: str, messages: Sequence[Any], tools: Sequence[Any]) -> str | dict[str, Any]:
    """The gold's next reply to ``messages`` for ``task``."""
    action = solve(task, latest_observation(messages), taken(read_history(messages)))
    if action is None:
        return GIVE_UP
    call = as_call(action)
    if call is not None and call["name"] in offered_functions(tools):
        return {"content": text_reply(action).split("\n")[0], "tool_calls": [call]}
    return text_reply(action)


class ReplayMiniwob:
    """``replay/miniwob`` as an offline policy plugin."""

    description = "TEST DOUBLE: solves MiniWoB++ tasks with their scripted gold, read from the page"
    # no ``version``: the cache key hashes the sources it imports (the solvers in .gold), so a
    # changed solver never serves rollouts cached under the old one

    def view(self, env: Any, task: Any) -> dict[str, Any]:
        return dict(env.oracle(task))

    def reply(
        self,
        view: dict[str, Any],
        messages: list[Any],
        seed: int,
        params: dict[str, Any],
        tools: list[dict[str, Any]],
    ) -> str | dict[str, Any]:
        return next_reply(str(view.get("task", "")), messages, tools)
