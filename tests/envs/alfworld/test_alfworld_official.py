"""harnessctl's ALFWorld episodes against ALFWorld's own evaluation environment, side by side.

The official env is built by ALFWorld's own code, ``AlfredTWEnv.init_env`` as the evaluation
runs it (``eval_out_of_distribution``: ``textworld.gym`` with the ``won``,
``admissible_commands`` and ``gamefile`` infos, the ``AlfredDemangler`` and ``AlfredInfos``
wrappers and the 50-step limit); only its game list is set here, since the shipped games
come without ALFRED's ``traj_data.json``, which its file search reads. Both play the same
commands; at every step the observation, the admissible commands (in order), the score,
``won`` and ``done`` must be identical, including a blank command, commands with inner
doubled spaces, tabs, outer whitespace, other case or trailing punctuation, the steps after
a win, the 50th step without a win and the steps after it.

A subset keeps this file to about two minutes on two quiet cores (an official step costs
0.1-0.3 s): 2 games of each of the six task types (12 of the 36 shipped), drawn with a fixed
seed, play their walkthroughs with adversarial commands woven in (the answer memo on, and
on 3 of them off); 4 of them (4 task types) play a seeded random playout of admissible and
inadmissible commands to two steps past the step limit. ``HARNESSCTL_TEST_ALFWORLD_ALL=1``
plays every shipped game instead (about seven minutes; run it with ``--timeout 900``): all 36
walkthroughs, 12 random playouts, 9 walkthroughs with the memo off.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harnessctl.envs import get_environment
from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")

try:
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv
except ImportError:  # CI must run these: it fails there instead of skipping
    if os.environ.get("CI"):
        raise
    pytest.skip("pip install -e '.[alfworld]' to run these", allow_module_level=True)

GAMES = ROOT / "examples" / "alfworld" / "games"
PER_TYPE = 2
ALL = os.environ.get("HARNESSCTL_TEST_ALFWORLD_ALL") == "1"
LIMIT = 50
JUNK = ["", "   ", "\t", "jump", "go to the moon", "inventory.", "look around"]


def _variants(command: str) -> list[str]:
    """Ways of writing ``command`` that a harness might send."""
    doubled = command.replace(" ", "  ", 1)
    return [
        doubled,
        command.replace(" ", "\t", 1),
        command.upper(),
        command.capitalize(),
        command + ".",
        command + "!",
        f"  {command} \t",
        f"\n{command}\n",
    ]


def _official(paths: list[Path]):
    """ALFWorld's evaluation env (``AlfredTWEnv.init_env``) over ``paths``."""
    env = object.__new__(AlfredTWEnv)
    env.config = {
        "env": {"domain_randomization": False, "expert_type": "handcoded"},
        "general": {"training_method": "dagger"},
        "dagger": {"training": {"max_nb_steps_per_episode": LIMIT}},
    }
    env.train_eval = "eval_out_of_distribution"
    env.game_files = [str(p) for p in paths]
    return env.init_env(batch_size=1)


@pytest.fixture(scope="module")
def games():
    tasks = get_environment("alfworld").load_tasks(GAMES).tasks
    by_type = defaultdict(list)
    for task in tasks:
        by_type[task.category].append(task)
    rng = random.Random(30)
    chosen = [
        t
        for kind in sorted(by_type)
        for t in rng.sample(by_type[kind], len(by_type[kind]) if ALL else PER_TYPE)
    ]
    return {str(GAMES / t.record["game_dir"] / "game.tw-pddl"): t for t in chosen}


@pytest.fixture(scope="module")
def official(games):
    env = _official(list(games))
    yield env
    env.close()


def _walk_script(task, rng: random.Random) -> list[str]:
    """The walkthrough, each command written another way or preceded by a refused one, and
    two commands after the win."""
    script = []
    for command in task.record["walkthrough"]:
        roll = rng.random()
        if roll < 0.3:
            script.append(rng.choice(_variants(command)))
        elif roll < 0.45:
            script.append(rng.choice(JUNK))
        script.append(command if roll >= 0.3 else f" {command} ")
    return [*script, "look", ""]


def _shown(obs, score, done, infos) -> tuple:
    return (obs[0], list(infos["admissible_commands"][0]), score[0], infos["won"][0], done[0])


def _mine(result) -> tuple:
    info = result.info
    return (
        result.observation,
        info["admissible_commands"],
        info["score"],
        info["won"],
        result.done,
    )


def _play_both(official, env, games, pick, label: str) -> dict[str, tuple[int, int, bool]]:
    """One official episode per game (the official env cycles through its games); ``pick``
    gives the next command from (task, rng, admissible, step). Returns, per game, the steps
    played, the step that was first ``done`` (0: none) and whether the game was won."""
    played: dict[str, tuple[int, int, bool]] = {}
    with ThreadPoolExecutor(1) as side:  # harnessctl's engine works while the official does
        for _ in games:
            obs, infos = official.reset()
            path = infos["extra.gamefile"][0]
            task = games[path]
            rng = random.Random(f"{label}|{task.id}")
            episode = env.open_episode(task, 0)
            try:
                first = episode.reset()
                assert first.observation == obs[0], (task.id, "reset")
                assert first.info["admissible_commands"] == list(infos["admissible_commands"][0])
                assert first.info["won"] is infos["won"][0] is False
                admissible = first.info["admissible_commands"]
                step, script, first_done = 0, None, 0
                while True:
                    command, script = pick(task, rng, admissible, step, script)
                    if command is None:
                        break
                    step += 1
                    mine = side.submit(episode.step, "act", command, None)
                    theirs = _shown(*official.step([command]))
                    ours = _mine(mine.result())
                    assert ours == theirs, (task.id, label, step, command)
                    assert ("error" in mine.result().info) == (ours[0] == "Nothing happens."), (
                        task.id,
                        step,
                        command,
                    )
                    admissible = ours[1]
                    first_done = first_done or (step if ours[4] else 0)
                played[task.id] = (step, first_done, ours[3])
            finally:
                episode.close()
    assert sorted(played) == sorted(t.id for t in games.values())
    return played


def _walk(task, rng, admissible, step, script):
    script = script if script is not None else _walk_script(task, rng)
    return (script[step] if step < len(script) else None), script


def _random(task, rng, admissible, step, script):
    """Admissible commands and refused ones, to two steps past the step limit."""
    if step >= LIMIT + 2:
        return None, None
    roll = rng.random()
    if roll < 0.55 and admissible:
        return rng.choice(admissible), None
    if roll < 0.85 and admissible:
        return rng.choice(_variants(rng.choice(admissible))), None
    return rng.choice(JUNK), None


def test_walkthroughs_with_adversarial_commands_match_the_official_env(official, games):
    played = _play_both(official, get_environment("alfworld"), games, _walk, "walk")
    for steps, first_done, won in played.values():  # won, then steps repeating the win
        assert won and 0 < first_done <= steps - 2


def test_random_playouts_past_the_step_limit_match_the_official_env(games):
    subset = dict(list(games.items())[::3])
    assert len({t.category for t in subset.values()}) == (6 if ALL else 4)
    official = _official(list(subset))
    try:
        played = _play_both(official, get_environment("alfworld"), subset, _random, "random")
    finally:
        official.close()
    assert {steps for steps, _, _ in played.values()} == {LIMIT + 2}
    assert (LIMIT + 2, LIMIT, False) in played.values()  # done at the limit, not won


def test_the_answer_memo_off_matches_the_official_env_too(games):
    subset = dict(list(games.items())[1::4])
    official = _official(list(subset))
    try:
        _play_both(official, get_environment("alfworld", memo=False), subset, _walk, "walk")
    finally:
        official.close()
