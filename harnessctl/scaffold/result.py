"""The typed ``--json`` result of ``harnessctl new-env`` (a :class:`harnessctl.records.Result`,
kept beside the scaffold so the command's plain path imports no pydantic)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..records import Result


class NewEnvResult(Result):
    kind: Literal["new-env"] = "new-env"
    version: int = 1
    name: str
    """The environment kind (also the Python package and ``sim/NAME``)."""
    root: str
    """The package's directory."""
    base: str
    """The base harness's name."""
    files: list[str] = Field(default_factory=list)
    """Every file written, relative to ``root``."""
    next_steps: list[str] = Field(default_factory=list)
    """The commands that install and run it."""
