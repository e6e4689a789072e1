"""Task files: JSON lines, one game per line (``game`` documents a game's fields).

A broken line becomes a :class:`~harnessctl.envs.TaskProblem` naming the file, the line and
the field at fault; the other lines still load. Task ids are ``<file stem>-<index:03d>``,
the index counting the non-blank lines (broken ones too), so fixing a line renames nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from harnessctl.envs import Task, TaskProblem, TaskSet
from harnessctl.errors import ConfigError

from .game import World, solve

KIND = "toy"


class GameError(ValueError):
    """A game record that cannot be played; the message starts with the field path."""


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise GameError(f"{where}: expected a non-empty string, got {value!r}")
    if value != value.strip().lower() or "  " in value:
        raise GameError(f"{where}: names are lower case with single spaces, got {value!r}")
    return value


def check_game(game: Any) -> None:
    """Raise :class:`GameError` naming the field path when ``game`` is not a playable game."""
    if not isinstance(game, dict):
        raise GameError(f"record: expected a JSON object, got {type(game).__name__}")
    unknown = sorted(set(game) - {"name", "category", "room", "places", "goal", "start"})
    if unknown:
        raise GameError(f"record: unknown field(s) {unknown}")
    _text(game.get("category"), "category")
    _text(game.get("room"), "room")
    places = game.get("places")
    if not isinstance(places, list) or not places:
        raise GameError("places: expected a non-empty list of places")
    names: set[str] = set()
    objects: set[str] = set()
    for i, place in enumerate(places):
        where = f"places[{i}]"
        if not isinstance(place, dict):
            raise GameError(f"{where}: expected an object")
        extra = sorted(set(place) - {"name", "container", "closed", "objects"})
        if extra:
            raise GameError(f"{where}: unknown field(s) {extra}")
        name = _text(place.get("name"), f"{where}.name")
        if name in names:
            raise GameError(f"{where}.name: {name!r} occurs twice")
        names.add(name)
        for flag in ("container", "closed"):
            if not isinstance(place.get(flag, False), bool):
                raise GameError(f"{where}.{flag}: expected true or false")
        if place.get("closed") and not place.get("container"):
            raise GameError(f"{where}.closed: only a container can be closed")
        items = place.get("objects", [])
        if not isinstance(items, list):
            raise GameError(f"{where}.objects: expected a list of object names")
        for j, item in enumerate(items):
            obj = _text(item, f"{where}.objects[{j}]")
            if obj in objects:
                raise GameError(f"{where}.objects[{j}]: {obj!r} occurs twice in the game")
            objects.add(obj)
    goal = game.get("goal")
    if not isinstance(goal, dict) or set(goal) not in ({"take"}, {"put", "in"}):
        raise GameError('goal: expected {"take": OBJECT} or {"put": OBJECT, "in": PLACE}')
    obj = _text(goal.get("take", goal.get("put")), "goal.take" if "take" in goal else "goal.put")
    if obj not in objects:
        raise GameError(f"goal: there is no {obj!r} in any place")
    if "in" in goal:
        target = _text(goal["in"], "goal.in")
        if target not in names:
            raise GameError(f"goal.in: there is no place {target!r}")
        if any(p["name"] == target and obj in (p.get("objects") or []) for p in places):
            raise GameError(f"goal: the {obj} is already in the {target}")
    if "start" in game and _text(game["start"], "start") not in names:
        raise GameError(f"start: there is no place {game['start']!r}")
    world = World(game)
    plan = solve(game)
    for command in plan:
        if world.won():
            break
        world.execute(command)
    if not world.won():  # a bug in the game engine, never in the record
        raise GameError(f"goal: the planned solution {plan} does not win the game")


def content_hash(record: dict[str, Any]) -> str:
    blob = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def load_games(path: Path) -> TaskSet:
    """Load a JSONL file of games. Raises ``ConfigError`` only if it cannot be read."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read task file: {exc.strerror or exc}") from exc
    tasks: list[Task] = []
    problems: list[TaskProblem] = []
    index = 0
    for line_no, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        task_id = f"{path.stem}-{index:03d}"
        index += 1
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append(TaskProblem(str(path), line_no, f"record: not valid JSON: {exc}"))
            continue
        try:
            check_game(record)
        except GameError as exc:
            problems.append(TaskProblem(str(path), line_no, str(exc)))
            continue
        tasks.append(
            Task(
                id=task_id,
                env=KIND,
                category=record["category"],
                record=record,
                content_hash=content_hash(record),
                source=f"{path}:{line_no}",
            )
        )
    return TaskSet(tasks=tasks, problems=problems)
