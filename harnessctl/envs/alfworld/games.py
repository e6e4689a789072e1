"""Reading ALFWorld game files: any directory laid out as ALFWorld's data release lays a
split out (``<task-type>-<object>-<mrecep>-<receptacle>-<scene>/trial_<id>/game.tw-pddl``),
so ``valid_seen``, ``valid_unseen`` or a sample of either loads as it is.

A game file is JSON with ``pddl_domain``, ``grammar``, ``pddl_problem`` (strings),
``solvable`` (a boolean) and ``walkthrough`` (the expert commands that win the game). A file
that fails a check (not JSON, a missing or ill-typed field, a task type outside the six, an
unsolvable game or an empty walkthrough) becomes a ``TaskProblem`` naming the file and the
field; the other games still load. A game's task id is ``<game folder>.<trial id>``: it
names the game wherever the directory is, and adding a game never renames another.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from harnessctl.envs import Task, TaskProblem, TaskSet

KIND = "alfworld"
GAME_FILE = "game.tw-pddl"
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
"""ALFWorld's six task types: a game's category."""
_STRINGS = ("pddl_domain", "grammar", "pddl_problem")


class GameError(ValueError):
    """A game file is unreadable or a field is wrong; ``str()`` is ``field: what is wrong``."""


def game_files(root: Path) -> list[Path]:
    """Every ``game.tw-pddl`` under ``root`` (or ``root`` itself when it is one), sorted."""
    root = Path(root)
    if root.is_file():
        return [root]
    return sorted(root.rglob(GAME_FILE))


def task_type(game_dir_name: str) -> str:
    """The task type a game folder's name begins with (``pick_and_place_simple-Book-...``)."""
    return game_dir_name.split("-", 1)[0]


def check_game(data: Any) -> None:
    """Raise ``GameError`` naming the first field that is missing or wrong."""
    if not isinstance(data, dict):
        raise GameError(f"(top level): expected a JSON object, got {type(data).__name__}")
    for key in _STRINGS:
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise GameError(f"{key}: missing or not a non-empty string")
    if not isinstance(data.get("solvable"), bool):
        raise GameError("solvable: missing or not a boolean")
    if not data["solvable"]:
        raise GameError("solvable: false (the game cannot be won)")
    walk = data.get("walkthrough")
    if not isinstance(walk, list) or not all(isinstance(c, str) and c.strip() for c in walk):
        raise GameError("walkthrough: missing or not a list of commands")
    if not walk:
        raise GameError("walkthrough: empty (a solvable game is won by at least one command)")


_GOAL = re.compile(r'"task"\s*:\s*\[\s*\{\s*"rhs"\s*:\s*"([^"]*)"')


def goal_text(data: dict[str, Any]) -> str:
    """The game's goal as the game states it ("Your task is to: put a clean mug in coffee
    machine."), read from the grammar's ``task`` rule; "" when the grammar has none."""
    match = _GOAL.search(str(data.get("grammar") or ""))
    return match.group(1).strip() if match else ""


def content_hash(data: dict[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def load_game(path: Path) -> Task:
    """One game file as a task (``GameError`` when it does not check)."""
    path = Path(path)
    trial, game = path.parent, path.parent.parent
    kind = task_type(game.name)
    if kind not in TASK_TYPES:
        raise GameError(
            f"(folder {game.name}): task type {kind!r} is not one of ALFWorld's six "
            f"({', '.join(TASK_TYPES)}); the release's layout is "
            "<task-type>-<object>-<mrecep>-<receptacle>-<scene>/trial_<id>/game.tw-pddl"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise GameError(f"(file): unreadable: {exc}") from None
    except json.JSONDecodeError as exc:
        raise GameError(f"(file): not JSON: {exc.msg} at line {exc.lineno}") from None
    check_game(data)
    trial_id = trial.name.removeprefix("trial_")
    return Task(
        id=f"{game.name}.{trial_id}",
        env=KIND,
        category=kind,
        record={**data, "game_dir": f"{game.name}/{trial.name}"},
        content_hash=content_hash(data),
        source=f"{path}:1",
    )


def load_games(root: Path) -> TaskSet:
    """Every game under ``root``; a broken one is a problem naming its file and field."""
    tasks: list[Task] = []
    problems: list[TaskProblem] = []
    seen: dict[str, Path] = {}
    for path in game_files(root):
        try:
            task = load_game(path)
        except GameError as exc:
            problems.append(TaskProblem(str(path), 1, str(exc)))
            continue
        if task.id in seen:
            problems.append(TaskProblem(str(path), 1, f"(id): {task.id} also at {seen[task.id]}"))
            continue
        seen[task.id] = path
        tasks.append(task)
    if not tasks and not problems:
        problems.append(TaskProblem(str(root), 0, f"no {GAME_FILE} under this path"))
    return TaskSet(tasks, problems)
