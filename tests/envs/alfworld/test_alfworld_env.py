"""The ``alfworld`` environment on ALFWorld's own package: episodes (steps, admissible
commands, "Nothing happens." as a rejected command, the step limit), the determinism the
answer memo relies on, gold kept on the host, and the missing package named."""

from __future__ import annotations

import json
import os
import random

import pytest

from harnessctl.envs import get_environment
from harnessctl.errors import ConfigError
from tests.helpers import ROOT

try:
    import alfworld  # noqa: F401  (the `alfworld` extra; .ci/run installs it)
except ImportError:  # CI must run these: it fails there instead of skipping
    if os.environ.get("CI"):
        raise
    pytest.skip("pip install -e '.[alfworld]' to run these", allow_module_level=True)

SUITE = ROOT / "examples" / "alfworld"


@pytest.fixture(scope="module")
def env():
    return get_environment("alfworld")


@pytest.fixture(scope="module")
def tasks(env):
    loaded = env.load_tasks(SUITE / "games")
    assert not loaded.problems
    return loaded.tasks


def test_the_kind_is_host_served_with_one_tool_and_the_papers_step_limit(env):
    assert env.kind == "alfworld" and env.surface == "host"
    assert env.tools == ("act",) and env.max_steps == 50
    assert (env.directions / "repairs").is_dir()


def test_each_walkthrough_wins_and_nothing_gold_reaches_the_harness(env, tasks, tmp_path):
    for task in tasks[::9]:
        env.prepare(task, tmp_path / task.id)
        public = json.loads((tmp_path / task.id / "task.json").read_text())
        assert set(public) == {"task_id", "env", "instruction"}
        assert public["instruction"].startswith("Your task is to: ")
        episode = env.open_episode(task, 0)
        try:
            first = episode.reset()
            assert first.observation.endswith(public["instruction"])
            assert first.info["admissible_commands"] and "error" not in first.info
            shown = [json.dumps(public), first.observation]
            for step in env.replay(task):
                command = step["tool_call"]["arguments"]["command"]
                assert step["text"].endswith(f"\nAction: {command}")
                result = episode.step("act", command, None)
                shown.append(result.observation)
            assert result.done and env.score(task, tmp_path, None, episode).success
            walkthrough = " | ".join(task.record["walkthrough"])
            assert walkthrough not in "\n".join(shown) and "walkthrough" not in str(public)
        finally:
            episode.close()


@pytest.mark.slow
def test_shuffled_or_empty_walkthroughs_do_not_win(env, tasks, tmp_path):
    rng = random.Random(7)
    for task in tasks[::12]:
        walkthrough = list(task.record["walkthrough"])
        shuffled = walkthrough[:]
        while shuffled == walkthrough:
            rng.shuffle(shuffled)
        for commands in ([], shuffled):
            episode = env.open_episode(task, 0)
            try:
                episode.reset()
                for command in commands:
                    episode.step("act", command, None)
                assert not env.score(task, tmp_path, None, episode).success, (task.id, commands)
            finally:
                episode.close()


def test_a_command_the_game_does_not_accept_is_marked_and_the_function_form_works(env, tasks):
    task = tasks[0]
    episode = env.open_episode(task, 0)
    try:
        episode.reset()
        refused = episode.step("act", "pick up the moon", None)
        assert refused.observation == "Nothing happens."
        assert "not admissible" in refused.info["error"]
        assert not refused.done and refused.info["admissible_commands"]
        look = episode.step("act", "", {"command": "look"})  # the function-call form
        assert look.observation.startswith("You are in the middle of a room")
        assert not look.info.get("error")
        assert "error" in episode.step("act", "", {"command": 3}).info
        assert "error" in episode.step("act", "   ", None).info
        assert "unknown tool" in episode.step("sql", "look", None).info["error"]
        first = task.record["walkthrough"][0]
        moved = episode.step("act", f"  {first.upper()}  ", None)  # the game is case-sensitive
        assert moved.observation == "Nothing happens."
        assert episode.steps == 6  # every request is a step, as the gateway counts it
    finally:
        episode.close()


@pytest.mark.slow
def test_answers_are_the_same_from_memory_and_from_the_game(tasks):
    """The memo serves an answer only where the game would give the same one."""
    from harnessctl.envs.alfworld.play import Game

    rng = random.Random(3)
    for task in tasks[1::12]:
        played, views = [], []
        game = Game(task.record, memo=False)
        views.append(game.reset())
        for _ in range(8):
            played.append(rng.choice([*views[-1].admissible, "jump"]))
            views.append(game.step(played[-1]))
        game.close()
        for memo in (True, True):  # the second pass is answered from memory
            game = Game(task.record, memo=memo)
            assert [game.reset(), *(game.step(c) for c in played)] == views
            # restarting mid-episode puts the game back at its start
            assert game.reset() == views[0] and game.step(played[0]) == views[1]
            game.close()


def test_without_the_package_the_error_names_the_extra(env, tasks, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name, *args):
        return None if name == "textworld" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ConfigError) as caught:
        env.open_episode(tasks[0], 0)
    assert "'textworld' is not installed" in str(caught.value)
    assert "pip install 'harnessctl[alfworld]'" in str(caught.value)


def test_env_options_are_checked(tmp_path):
    with pytest.raises(ValueError, match="memo must be true or false"):
        get_environment("alfworld", memo="yes")
    assert get_environment("alfworld", memo=False).memo is False


def test_a_game_the_engine_cannot_load_raises_and_spoils_no_later_game(env, tasks):
    """The episode's exception is what the gateway records as the rollout's infrastructure
    error (retried, never the harness's failure); the engine it broke is not reused."""
    from dataclasses import replace

    from harnessctl.envs.alfworld import play

    def discarded() -> int:  # engines built and neither idle nor in use
        return play.pool_size() - len(play._POOL.idle)

    before = discarded()
    broken = replace(tasks[2], record={**tasks[2].record, "pddl_problem": "(define (problem"})
    episode = env.open_episode(broken, 0)
    with pytest.raises(Exception):  # noqa: B017  (whatever the engine raises)
        episode.reset()
    episode.close()
    assert discarded() == before + 1  # the engine it broke is not handed to another game
    good = env.open_episode(tasks[2], 0)
    try:
        good.reset()
        for command in tasks[2].record["walkthrough"]:
            result = good.step("act", command, None)
        assert result.done and good.won
    finally:
        good.close()


@pytest.mark.slow
def test_through_the_gateway_a_blank_command_is_a_step_and_the_50th_is_done(env, tasks):
    """A blank command is answered as ALFWorld answers it (with the admissible commands) and
    counts in the episode's steps and the gateway's step budget alike; the 50th step without
    a win says done (truncated), and the rollout's 51st step is refused."""
    from harnessctl.gateway import Budget, Gateway
    from harnessctl.runtime.client import GatewayClient
    from harnessctl.runtime.env import EnvClient, StepLimit

    gateway = Gateway().start()
    episode = env.open_episode(tasks[5], 0)
    try:
        budget = Budget(max_steps=env.max_steps)
        token = gateway.open_rollout("t", model="m", params={}, budget=budget, episode=episode)
        client = EnvClient(GatewayClient(gateway.address, token))
        first = client.reset()
        blank = client.step("act", "   ")
        assert blank.observation == "Nothing happens." and not blank.done
        assert blank.info["admissible_commands"] == first.info["admissible_commands"]
        assert blank.info["won"] is False and blank.info["score"] == 0
        assert episode.steps == 1
        for n in range(2, 50):
            result = client.step("act", "look" if n % 10 == 0 else "")
            assert not result.done, n
        last = client.step("act", "inventory")
        assert last.done and last.info["truncated"] and not last.info["won"]
        assert episode.steps == 50 and not episode.won
        with pytest.raises(StepLimit):
            client.step("act", "look")
        ledger = gateway.close_rollout(token)
        statuses = [s.status for s in ledger.steps if s.kind == "step"]
        assert len(statuses) == 51 and statuses[-1] == "step_budget_exceeded"
        assert statuses.count("rejected") == 45  # the blanks: "Nothing happens."
    finally:
        episode.close()
        gateway.close()


def test_after_a_win_every_step_repeats_the_winning_answer(env, tasks):
    episode = env.open_episode(tasks[6], 0)
    try:
        episode.reset()
        for command in tasks[6].record["walkthrough"]:
            won = episode.step("act", command, None)
        assert won.done and won.info["won"] and won.info["score"] == 1
        for command in ("look", "", "go to desk 1"):
            again = episode.step("act", command, None)
            assert (again.observation, again.done, again.info) == (
                won.observation,
                True,
                won.info,
            )
        assert env.score(tasks[6], None, None, episode).success
    finally:
        episode.close()
