"""The toy household game: one room, a few places (surfaces and containers), a few objects.

A game is a JSON object (one line of a task file, see ``tasks``)::

    {"category": "put", "room": "kitchen",
     "places": [{"name": "countertop", "objects": ["apple"]},
                {"name": "fridge", "container": true, "closed": true, "objects": ["milk"]}],
     "goal": {"put": "apple", "in": "fridge"}}

``goal`` is ``{"take": OBJECT}`` (hold it) or ``{"put": OBJECT, "in": PLACE}``. The player
starts in the middle of the room (or at the place a game names as its ``start``), holds at
most one object and acts with one command per step (``COMMAND_FORMS``). A command the game
does not understand, or cannot carry out where the player is, answers ``Nothing happens.``
(as ALFWorld does) and says why in ``error``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

#: Every command the game understands, as the forms a harness may show the model.
COMMAND_FORMS = (
    "look",
    "inventory",
    "go to <place>",
    "take <object>",
    "open <container>",
    "close <container>",
    "put <object> in <place>",
)
NOTHING = "Nothing happens."
MIDDLE = None  # where the player starts: the middle of the room, at no place

_PUT = re.compile(r"^put (.+?) (?:in|on|into|onto) (.+)$")
_ARTICLE = re.compile(r"^(?:the|a|an) ")


@dataclass
class Outcome:
    """What one command did: the text the player sees, and why nothing happened (if so)."""

    text: str
    error: str | None = None


def normalise(command: str) -> str:
    """Lower case, single spaces, no surrounding quotes or trailing full stop."""
    text = " ".join(str(command).strip().strip("`'\"").split()).lower()
    return text.rstrip(".").strip()


def _name(text: str) -> str:
    return _ARTICLE.sub("", text.strip())


def _listing(items: list[str]) -> str:
    named = [f"a {item}" for item in items]
    if not named:
        return "nothing"
    if len(named) == 1:
        return named[0]
    return ", ".join(named[:-1]) + f" and {named[-1]}"


def goal_text(goal: dict[str, str]) -> str:
    """The goal in words, as the player is told it."""
    if "in" in goal:
        return f"put the {goal['put']} in the {goal['in']}."
    return f"find the {goal['take']} and take it."


class World:
    """The state of one game being played. Deterministic: the same commands, the same text."""

    def __init__(self, game: dict[str, Any]) -> None:
        self.room: str = game["room"]
        self.goal: dict[str, str] = dict(game["goal"])
        self.places: dict[str, dict[str, Any]] = {
            p["name"]: {
                "container": bool(p.get("container", False)),
                "closed": bool(p.get("closed", False)),
                "objects": list(p.get("objects") or []),
            }
            for p in copy.deepcopy(game["places"])
        }
        self.at: str | None = game.get("start", MIDDLE)
        self.holding: str | None = None

    # --- what the player sees -----------------------------------------------------------
    def _contents(self, name: str) -> str:
        place = self.places[name]
        if place["container"] and place["closed"]:
            return f"The {name} is closed."
        where = "In it" if place["container"] else f"On the {name}"
        state = f"The {name} is open. " if place["container"] else ""
        return f"{state}{where} you see {_listing(place['objects'])}."

    def look(self) -> str:
        if self.at is MIDDLE:
            return (
                f"You are in the middle of the {self.room}. Looking around, you see "
                f"{_listing(list(self.places))}."
            )
        return f"You are at the {self.at}. {self._contents(self.at)}"

    def visible(self, obj: str) -> bool:
        if self.at is MIDDLE:
            return False
        place = self.places[self.at]
        return obj in place["objects"] and not (place["container"] and place["closed"])

    def won(self) -> bool:
        """Whether the goal holds now."""
        if "in" in self.goal:
            target = self.places.get(self.goal["in"])
            return target is not None and self.goal["put"] in target["objects"]
        return self.holding == self.goal["take"]

    # --- commands -----------------------------------------------------------------------
    def execute(self, command: str) -> Outcome:
        """Carry out one command."""
        text = normalise(command)
        if text in ("look", "look around"):
            return Outcome(self.look())
        if text in ("inventory", "i"):
            if self.holding is None:
                return Outcome("You are not carrying anything.")
            return Outcome(f"You are carrying: a {self.holding}.")
        if text.startswith("go to "):
            return self._go(_name(text[6:]))
        if text.startswith("take "):
            return self._take(_name(text[5:]))
        if text.startswith("open "):
            return self._open(_name(text[5:]), True)
        if text.startswith("close "):
            return self._open(_name(text[6:]), False)
        put = _PUT.match(text)
        if put:
            return self._put(_name(put.group(1)), _name(put.group(2)))
        return Outcome(NOTHING, "unknown command")

    def _go(self, name: str) -> Outcome:
        if name not in self.places:
            return Outcome(NOTHING, f"there is no {name} here")
        self.at = name
        return Outcome(f"You arrive at the {name}. {self._contents(name)}")

    def _take(self, obj: str) -> Outcome:
        if self.holding is not None:
            return Outcome(NOTHING, "your hands are full")
        if not self.visible(obj):
            return Outcome(NOTHING, f"you see no {obj} here")
        self.places[str(self.at)]["objects"].remove(obj)
        self.holding = obj
        return Outcome(f"You take the {obj} from the {self.at}.")

    def _open(self, name: str, opening: bool) -> Outcome:
        verb = "open" if opening else "close"
        place = self.places.get(name)
        if place is None or not place["container"]:
            return Outcome(NOTHING, f"there is no {name} to {verb} here")
        if self.at != name:
            return Outcome(NOTHING, f"you are not at the {name}")
        if place["closed"] != opening:
            return Outcome(NOTHING, f"the {name} is already {'open' if opening else 'closed'}")
        place["closed"] = not opening
        if opening:
            return Outcome(f"You open the {name}. In it you see {_listing(place['objects'])}.")
        return Outcome(f"You close the {name}.")

    def _put(self, obj: str, name: str) -> Outcome:
        place = self.places.get(name)
        if self.holding != obj:
            return Outcome(NOTHING, f"you are not carrying a {obj}")
        if place is None or self.at != name:
            return Outcome(NOTHING, f"you are not at the {name}")
        if place["container"] and place["closed"]:
            return Outcome(NOTHING, f"the {name} is closed")
        place["objects"].append(obj)
        self.holding = None
        return Outcome(f"You put the {obj} {'in' if place['container'] else 'on'} the {name}.")


def solve(game: dict[str, Any]) -> list[str]:
    """The shortest command list that wins ``game`` (the gold; host only)."""
    world = World(game)
    goal = world.goal
    obj = goal.get("put", goal.get("take", ""))
    source = next(name for name, p in world.places.items() if obj in p["objects"])
    plan = [f"go to {source}"] if world.at != source else []
    if world.places[source]["closed"]:
        plan.append(f"open {source}")
    plan.append(f"take {obj}")
    if "in" in goal:
        target = goal["in"]
        plan.append(f"go to {target}")
        if world.places[target]["closed"]:
            plan.append(f"open {target}")
        plan.append(f"put {obj} in {target}")
    return plan
