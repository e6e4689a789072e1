"""tau2 episodes played in process, as the tau2 tests share them."""

from __future__ import annotations

from tests.helpers import ROOT

NOWHERE = ROOT / "unused"
"""The sandbox directory a host-served environment's scorer never reads."""


def replay(env, task, models=None):
    """The replay script played through one episode, as the harness would play it (with
    ``models`` as the episode's model access); the episode's score."""
    from harnessctl.envs.tau2 import RESPOND

    episode = env.open_episode(task, 0)
    episode.models = models
    episode.reset()
    for step in env.replay(task):
        if episode.done:
            break
        call = step.get("tool_call")
        if call:
            episode.step(call["name"], "", call["arguments"])
        else:
            episode.step(RESPOND, step["text"], None)
    return env.score(task, NOWHERE, None, episode)
