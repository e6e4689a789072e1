"""Repair directions: what an editor may change, why, and how much.

Directions are YAML files. Each environment ships the catalogue for its harness family (its
``directions`` attribute; DBBench's is ``harnessctl/envs/dbbench/directions/``); a workspace
adds or overrides directions in its own ``directions/`` folder (same format, same names win).
"""

from __future__ import annotations

import fnmatch
import logging
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import ConfigError
from ..harness import format_validation_error, read_yaml
from ..outcomes import ALL_OUTCOMES

log = logging.getLogger(__name__)


class Direction(BaseModel):
    """One repair direction."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Short kebab-case name, used in variant names and commit trailers."""
    title: str = ""
    """One line for tables and reports."""
    brief: str
    """The repair brief an editor receives."""
    targets: list[str]
    """Outcomes this direction is meant to turn into successes."""
    files: list[str] = Field(default_factory=lambda: ["harness.py"])
    """Glob patterns (relative to the harness directory) an edit may touch."""
    hooks: list[str] = Field(default_factory=list)
    """Lifecycle hooks the edit should change (advice for the editor, shown in its prompt)."""
    max_changed_lines: int = 80
    """Edit budget: added plus removed lines over all files."""

    @field_validator("targets")
    @classmethod
    def _targets(cls, value: list[str]) -> list[str]:
        unknown = [v for v in value if v not in ALL_OUTCOMES]
        if unknown:
            raise ValueError(f"unknown outcome(s) {unknown}; known: {list(ALL_OUTCOMES)}")
        return value

    def allows(self, relpath: str) -> bool:
        return any(fnmatch.fnmatchcase(relpath, pattern) for pattern in self.files)


def load_direction(path: Path) -> Direction:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(str(path), "expected a mapping at the top level")
    try:
        return Direction.model_validate(data)
    except ValidationError as exc:
        raise format_validation_error(str(path), exc) from None


def builtin_dir(family: str) -> Path | None:
    """The directions the environment ``family`` ships (its ``directions`` attribute)."""
    from ..envs import get_environment

    folder = get_environment(family).directions
    return Path(folder) if folder else None


class Catalogue(dict[str, Direction]):
    """Directions by name, and the files that failed to load (``broken``: a name, or the
    file's stem when its name is unreadable, -> the error). A broken file affects only the
    direction it defines: :func:`select` refuses it when named, skips it (with a warning)
    when all directions are taken."""

    def __init__(self) -> None:
        super().__init__()
        self.broken: dict[str, ConfigError] = {}


def catalogue(family: str, workspace: Path | None = None) -> Catalogue:
    """The directions environment ``family`` ships, overridden/extended by
    ``<workspace>/directions``."""
    found = Catalogue()
    shipped = builtin_dir(family)
    dirs = [shipped] if shipped else []
    if workspace is not None:
        dirs.append(workspace / "directions")
    for folder in dirs:
        if folder.is_dir():
            for path in sorted(folder.glob("*.yaml")):
                try:
                    direction = load_direction(path)
                except ConfigError as exc:
                    found.broken[_declared_name(path)] = exc
                    continue
                found.broken.pop(direction.name, None)
                found[direction.name] = direction
    for name in found.broken:
        found.pop(name, None)  # a broken override never falls back to the shipped one
    return found


def _declared_name(path: Path) -> str:
    """The ``name:`` a direction file declares, else its stem."""
    try:
        data = read_yaml(path)
    except ConfigError:
        return path.stem
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else path.stem


def select(names: list[str] | None, available: dict[str, Direction]) -> list[Direction]:
    """The directions ``names`` (all when None). A named broken direction is its file's
    ConfigError; unnamed broken ones are skipped with a warning."""
    broken = getattr(available, "broken", {})
    if not names:
        for name, exc in broken.items():
            log.warning("direction %s skipped: %s", name, exc)
        return list(available.values())
    for name in names:
        if name in broken:
            raise broken[name]
    missing = [n for n in names if n not in available]
    if missing:
        raise ConfigError(
            "--directions", f"unknown direction(s) {missing}; known: {sorted(available)}"
        )
    return [available[n] for n in names]
