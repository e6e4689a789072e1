"""The miniwob tests' session fixture: MiniWoB++'s world (tests/helpers/miniwob_world.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def miniwob_world(tmp_path_factory):
    """The miniwob evolve (``miniwob_world.MINIWOB_EVOLVE``) in a workspace as `harnessctl
    init` makes it, run once per session: copy it (``.copy``), never change it."""
    from tests.helpers.miniwob_world import miniwob_world as build

    return build(tmp_path_factory)
