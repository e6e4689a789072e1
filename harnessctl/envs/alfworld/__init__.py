"""The ``alfworld`` environment: ALFWorld's household text games (Shridhar et al., ICLR 2021),
host-served.

A task is one game file (:mod:`.games` reads any directory laid out as ALFWorld's data
release lays a split out); its category is the game's task type, one of six. The game runs on
the host with ALFWorld's own package (:mod:`.play`; ``pip install 'harnessctl[alfworld]'``),
in an :class:`AlfworldEpisode` per rollout, and the harness acts on it with one tool, ``act``
(one game command per step, as text or as ``{"command": ...}``), through the rollout's
gateway socket. The sandbox sees ``task.json`` (the goal as the game states it) and the
observations; the walkthrough never leaves the host (``oracle`` and ``replay`` hand it to
offline test doubles only).

An episode answers exactly as ALFWorld's evaluation environment does (see
:class:`AlfworldEpisode`; ``tests/envs/alfworld/test_alfworld_official.py`` plays both side by
side). What a step tells the harness (``info``, public): ``admissible_commands``, the commands
the game accepts in the new state, ``won`` and ``score`` (ALFWorld's standard information; a
harness may show them or not: ``alfworld-base`` does not), ``error`` when the game answered
"Nothing happens." (the command was not admissible, so nothing changed) and ``truncated`` at
the 50th step without a win. Success: the game is won within the step limit (50 steps, as in
the papers); an episode that runs out of steps is ``step_limit``.

The games are deterministic, so answers already computed for the same game and commands are
served from memory (:class:`.play.Game`); ``env_options: {memo: false}`` runs every command
in the game.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harnessctl.envs import Environment, Episode, ReplayScript, Score, StepResult, Task, TaskSet

from .games import GAME_FILE, KIND, TASK_TYPES, GameError, check_game, goal_text, load_games
from .play import NOTHING, Game, require_package

HERE = Path(__file__).resolve().parent
TASK_FILE = "task.json"
TOOL = "act"
#: Environment steps per rollout, as in the ALFWorld papers (ReAct, Reflexion, Harness-R1).
MAX_STEPS = 50
NOT_ADMISSIBLE = "the command is not admissible in this state, so nothing changed"


def public_task(task: Task) -> dict[str, Any]:
    """What the sandbox may see of a task (the content of ``task.json``): no walkthrough."""
    return {"task_id": task.id, "env": KIND, "instruction": goal_text(task.record)}


def _command(tool: str, argument: str, arguments: dict[str, Any] | None) -> tuple[str, str | None]:
    """The game command of a step (stripped of leading and trailing whitespace only, as
    ALFWorld's ``PddlEnv`` strips it), and why the request is not a game command (None when
    it is). A request that is not one is played as the blank command: "Nothing happens."."""
    if tool != TOOL:
        return "", f"unknown tool {tool!r}; use {TOOL!r}"
    if arguments is not None:
        command = arguments.get("command", "")
        if not isinstance(command, str):
            return "", "arguments.command must be a string"
        argument = command
    command = argument.strip()
    if not command:
        return "", "empty command: send one game command, e.g. `go to desk 1`"
    return command, None


class AlfworldEpisode(Episode):
    """One game played for one rollout (host only; see harnessctl.envs.Episode), answering
    as ALFWorld's evaluation environment answers (``textworld.gym`` with the ``won`` and
    ``admissible_commands`` infos, ``AlfredDemangler`` and the 50-step limit):

    - every step request is a step, as the gateway's step budget counts it: a blank command
      (and a request that is no game command: another tool, a non-string ``command``) is
      answered "Nothing happens." with the admissible commands, like any command the game
      does not accept;
    - ``done`` when the game is won or at the 50th step (then ``info["truncated"]``: the
      episode was cut at its step limit, not ended by the game; the runtime's ``step_limit``);
    - once done, every further step repeats the last answer (observation, done, info).

    ``info``: ``admissible_commands`` and ``won`` (and ``score``, 1 once won, after a step),
    as the official env's infos; ``error`` when the command was not run ("Nothing happens.")."""

    def __init__(self, task: Task, memo: bool = True) -> None:
        self.task = task
        self.game = Game(task.record, memo=memo)
        self.steps = 0
        self.won = False
        self.done = False
        self._last: StepResult | None = None

    def reset(self) -> StepResult:
        view = self.game.reset()
        self.steps, self.won, self.done, self._last = 0, view.won, False, None
        info = {"won": view.won, "admissible_commands": list(view.admissible)}
        return StepResult(view.observation, info=info)

    def step(self, tool: str, argument: str, arguments: dict[str, Any] | None) -> StepResult:
        self.steps += 1
        if self.done and self._last is not None:
            last = self._last
            return StepResult(last.observation, done=True, info=json.loads(json.dumps(last.info)))
        command, refused = _command(tool, argument, arguments)
        view = self.game.step(command)
        self.won = view.won
        self.done = view.won or self.steps >= MAX_STEPS
        info: dict[str, Any] = {
            "won": view.won,
            "score": 1 if view.won else 0,
            "admissible_commands": list(view.admissible),
        }
        if refused:
            info["error"] = refused
        elif view.observation.strip() == NOTHING and not view.won:
            info["error"] = NOT_ADMISSIBLE
        if self.done and not view.won:
            info["truncated"] = True
        self._last = StepResult(view.observation, done=self.done, info=info)
        return StepResult(view.observation, done=self.done, info=dict(info))

    def close(self) -> None:
        self.game.close()


class AlfworldEnvironment(Environment):
    """ALFWorld's household text games (see the module docstring)."""

    kind = KIND
    surface = "host"
    #: The harness's one action: ``act`` takes one game command.
    tools = (TOOL,)
    max_steps = MAX_STEPS
    #: Model calls per rollout: the 50 steps and room for re-prompts and rejected commands.
    max_calls = 60
    #: Tokens per rollout: 50 turns with the whole history in context come to ~150,000.
    max_tokens = 400_000
    #: Bumped when loading, episodes or scoring change what a rollout's outcome would be.
    version = "2"
    #: Repair directions for ALFWorld harnesses, with the rule-based editor's repairs.
    directions = HERE / "directions"

    def __init__(self, memo: bool = True) -> None:
        if not isinstance(memo, bool):
            raise ValueError(f"memo must be true or false, got {memo!r}")
        self.memo = memo

    def load_tasks(self, path: Path) -> TaskSet:
        """Every game under ``path``; a broken game file is a problem naming file and field."""
        return load_games(Path(path))

    def prepare(self, task: Task, workdir: Path) -> None:
        """Write ``task.json`` (the goal as the game states it) into ``workdir``."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        text = json.dumps(public_task(task), ensure_ascii=False, indent=2)
        (workdir / TASK_FILE).write_text(text + "\n", encoding="utf-8")

    def open_episode(self, task: Task, seed: int) -> AlfworldEpisode:
        """A fresh game for one rollout; the game is deterministic, so ``seed`` is unused.
        ``ConfigError`` (the run stops) when ALFWorld's package is not installed."""
        require_package()
        return AlfworldEpisode(task, self.memo)

    def score(
        self, task: Task, workdir: Path, answer: str | None, episode: Episode | None = None
    ) -> Score:
        """Success: the game was won within the step limit. The final answer is unused."""
        played = episode if isinstance(episode, AlfworldEpisode) else None
        won = bool(played and played.won)
        steps = played.steps if played else 0
        return Score(success=won, detail={"won": won, "steps": steps})

    def oracle(self, task: Task) -> dict[str, Any]:
        """The task and its walkthrough, for the offline simulated policy (host only)."""
        return {
            "task_id": task.id,
            "category": task.category,
            "goal": goal_text(task.record),
            "walkthrough": list(task.record["walkthrough"]),
        }

    def replay(self, task: Task) -> ReplayScript:
        """The walkthrough as a script for ``replay/alfworld``: each command in the text
        protocol (``Think:`` and ``Action:`` lines) and as a function call of ``act``."""
        return [
            {
                "text": f"Think: the next step of the plan is to {command}.\nAction: {command}",
                "tool_call": {"name": TOOL, "arguments": {"command": command}},
            }
            for command in task.record["walkthrough"]
        ]


__all__ = [
    "GAME_FILE",
    "KIND",
    "MAX_STEPS",
    "TASK_TYPES",
    "AlfworldEnvironment",
    "AlfworldEpisode",
    "GameError",
    "check_game",
    "goal_text",
    "load_games",
    "public_task",
]
