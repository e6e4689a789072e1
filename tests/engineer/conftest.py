"""The engineer tests' session fixture: DBBench's world exported as training data, and a
tiny model to train (tests/helpers/engineer.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.engineer import EngineerData, make_engineer_data


@pytest.fixture(scope="session")
def engineer_data(dbbench_world, tmp_path_factory) -> EngineerData:
    """Made once per session (every test process shares it); copy ``ws`` before changing
    its store."""
    from tests.helpers.worlds import once_per_session

    def make(where: Path) -> dict:
        return make_engineer_data(where, dbbench_world.root).to_json()

    return EngineerData.from_json(once_per_session(tmp_path_factory, "engineer-data", make))
