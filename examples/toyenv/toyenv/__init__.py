"""``toy``: a tiny household text game as a host-served harnessctl environment.

A TOY, and an example of writing an environment plugin as its own package: nothing in
harnessctl names it; it registers through the entry points in its ``pyproject.toml``
(``harnessctl.environments: toy`` and ``harnessctl.policies: sim/toy``).

Host-served: the game state lives on the host in a :class:`ToyEpisode`; the harness acts on
it with its one tool, ``act`` (one command per step), through the rollout's gateway socket.
The sandbox sees only ``task.json`` (the goal in words) and the observations; the solution
never leaves the host (``oracle`` and ``replay`` hand it to offline test doubles only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harnessctl.envs import Environment, Episode, ReplayScript, Score, StepResult, Task, TaskSet

from .game import COMMAND_FORMS, NOTHING, World, goal_text, solve
from .tasks import KIND, GameError, check_game, load_games

HERE = Path(__file__).resolve().parent
TASK_FILE = "task.json"
TOOL = "act"


def public_task(task: Task) -> dict[str, Any]:
    """What the sandbox may see of a task (the content of ``task.json``)."""
    return {
        "task_id": task.id,
        "env": KIND,
        "instruction": f"Your task is to: {goal_text(task.record['goal'])}",
    }


class ToyEpisode(Episode):
    """One game being played for one rollout (host only; see harnessctl.envs.Episode)."""

    def __init__(self, task: Task, max_steps: int) -> None:
        self.task = task
        self.max_steps = max_steps
        self.world = World(task.record)
        self.steps = 0
        self.won = False

    def reset(self) -> StepResult:
        self.world = World(self.task.record)
        self.steps, self.won = 0, False
        return StepResult(self.world.look(), info={"commands": list(COMMAND_FORMS)})

    def step(self, tool: str, argument: str, arguments: dict[str, Any] | None) -> StepResult:
        if tool != TOOL:
            return StepResult(NOTHING, info={"error": f"unknown tool {tool!r}; use {TOOL!r}"})
        command = argument
        if arguments is not None:
            command = arguments.get("command", "")
            if not isinstance(command, str):
                return StepResult(NOTHING, info={"error": "arguments.command must be a string"})
        if self.won:
            return StepResult("The task is already complete.", done=True)
        self.steps += 1
        outcome = self.world.execute(command)
        if outcome.error is not None:
            return StepResult(outcome.text, info={"error": outcome.error})
        self.won = self.world.won() and self.steps <= self.max_steps
        if self.won:
            return StepResult(outcome.text + " You have completed the task.", done=True)
        return StepResult(outcome.text)

    def close(self) -> None:
        pass


class ToyEnvironment(Environment):
    """The toy household game (see the module docstring)."""

    kind = KIND
    surface = "host"
    #: The harness's actions: ``act`` takes one game command (text, or ``{"command": ...}``).
    tools = (TOOL,)
    #: Environment steps per rollout (resets not counted); the gateway refuses more.
    max_steps = 20
    #: Bumped when games, observations or scoring change what a rollout's outcome would be.
    version = "1"
    #: Repair directions for toy harnesses, with the rule-based editor's repairs.
    directions = HERE / "directions"

    def load_tasks(self, path: Path) -> TaskSet:
        """Load a JSONL file of games; broken lines become problems naming file and field."""
        return load_games(Path(path))

    def prepare(self, task: Task, workdir: Path) -> None:
        """Write ``task.json`` (the goal in words) into ``workdir``; no solution."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        text = json.dumps(public_task(task), ensure_ascii=False, indent=2)
        (workdir / TASK_FILE).write_text(text + "\n", encoding="utf-8")

    def open_episode(self, task: Task, seed: int) -> ToyEpisode:
        """A fresh game for one rollout (the game has no randomness: ``seed`` is unused)."""
        return ToyEpisode(task, self.max_steps)

    def score(
        self, task: Task, workdir: Path, answer: str | None, episode: Episode | None = None
    ) -> Score:
        """Success: the episode reached the goal within the step budget. The answer is unused."""
        played = episode if isinstance(episode, ToyEpisode) else None
        won = bool(played and played.won)
        steps = played.steps if played else 0
        return Score(success=won, detail={"won": won, "steps": steps})

    def oracle(self, task: Task) -> dict[str, Any]:
        """The whole game and its solution, for the offline simulated policy (host only)."""
        return {
            "task_id": task.id,
            "category": task.category,
            "goal": goal_text(task.record["goal"]),
            "solution": solve(task.record),
            "game": task.record,
        }

    def replay(self, task: Task) -> ReplayScript:
        """The solution as a script for ``replay/toy``: each command in the text protocol
        (``Action: <command>``) and as a function call of ``act``."""
        return [
            {
                "text": f"Action: {command}",
                "tool_call": {"name": TOOL, "arguments": {"command": command}},
            }
            for command in solve(task.record)
        ]


__all__ = [
    "COMMAND_FORMS",
    "KIND",
    "GameError",
    "ToyEnvironment",
    "ToyEpisode",
    "World",
    "check_game",
    "load_games",
    "public_task",
    "solve",
]
