"""Isolated workspaces for fixtures wider than a test (module or session scope), which start
before conftest's per-test isolation."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harnessctl.workspace import init_workspace

KEPT_ENV = frozenset(
    {"HARNESSCTL_TEST_OUTPUT", "HARNESSCTL_ALFWORLD_CACHE", "HARNESSCTL_TEST_SHARED"}
)
"""Variables isolation keeps: where tests keep artifacts; the session's shared cache of
ALFWorld's game translations (a pure function of the game: tests/conftest.py); the directory
concurrent test runs share (tests/helpers/worlds.py)."""


def isolate(mp: pytest.MonkeyPatch, home: Path, ws: Path) -> None:
    """conftest's isolation, for module-scoped fixtures (they start before it)."""
    for key in list(os.environ):
        kept = key in KEPT_ENV
        if (key.startswith("HARNESSCTL_") and not kept) or key.endswith("_API_KEY"):
            mp.delenv(key)
    for key, value in {
        "HOME": str(home),
        "NO_COLOR": "1",
        "COLUMNS": "120",
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.invalid",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.invalid",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HARNESSCTL_WORKSPACE": str(ws),
    }.items():
        mp.setenv(key, value)


@contextlib.contextmanager
def isolated_workspace(home: Path, root: Path, *, workers: int) -> Iterator[Path]:
    """A fresh workspace at ``root`` as `harnessctl init` makes it (the bundled harnesses and
    example suites), isolated (:func:`isolate`), using the local sandbox and ``workers``."""
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, home, root)
        init_workspace(root)
        config = root / "harnessctl.yaml"
        config.write_text(config.read_text() + f"sandbox: local\nworkers: {workers}\n")
        yield root
