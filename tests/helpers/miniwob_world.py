"""MiniWoB++'s session world, and what its end-to-end modules share.

The costly part of MiniWoB++'s end-to-end tests is one evolve on the offline defaults
(``MINIWOB_EVOLVE``: sim/miniwob, the rule-based editor, the same-batch gate, the train split,
about 100 s on an idle 2-core machine). It runs once per test session, in a workspace of its
own, whatever the number of test processes (:func:`miniwob_world`, the pattern of
:mod:`tests.helpers.worlds`); a module that needs its siblings takes a copy
(``World.copy``) and changes it freely.

The tests are two modules so that pytest-xdist's two processes (``--dist loadfile``) run
them side by side: ``test_miniwob_e2e.py`` builds on the world (the evolve, the gold with
every sibling, profiles, routing, the pool, ``test``, the report, the viewer) and
``test_miniwob_protocols.py`` needs no evolve (the gold's replays in text and function
calling, each sim mode and its repair, a kill -9 of an eval), so neither waits on the other.
Every test here is slow (``-m slow``), as the world is.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.helpers.cli import cli_json
from tests.helpers.worlds import World, build_world, once_per_session

SUITE = "examples/miniwob"
BASE = "miniwob-base"
TASKS = 45
WORKERS = 2
MINIWOB_EVOLVE = ("evolve", BASE, "--suite", SUITE, "--gate", "same-batch")
"""The world's evolve: every catalogue direction on the train split under sim/miniwob."""


def configure(root: Path) -> Path:
    """A workspace as `harnessctl init` makes it, on the local sandbox with ``WORKERS``."""
    from harnessctl.workspace import init_workspace

    init_workspace(root)
    config = root / "harnessctl.yaml"
    config.write_text(config.read_text() + f"sandbox: local\nworkers: {WORKERS}\n")
    return root


def miniwob_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """``MINIWOB_EVOLVE`` in its own workspace, once per session (all test processes)."""
    from tests.helpers.workspaces import isolate

    def make(where: Path) -> dict:
        root = where / "ws"
        with pytest.MonkeyPatch.context() as mp:
            isolate(mp, where / "home", root)
            configure(root)
            return build_world(root, *MINIWOB_EVOLVE).to_json()

    return World.from_json(once_per_session(tmp_path_factory, "world-miniwob", make))


def store(ws: Path):
    from harnessctl.workspace import load_workspace

    return load_workspace(ws).open_store()


def harness_hash(ws: Path, name: str) -> str:
    from harnessctl.harness import load_harness

    return load_harness(ws / "harnesses" / name).hash


def replay(ws: Path, name: str, *extra) -> dict:
    """``harnessctl eval NAME --policy replay/miniwob`` on every task, once (``--json``)."""
    args = ["eval", name, "--suite", SUITE, "--split", "dev", "--rollouts", 1, *extra]
    return cli_json(ws, *args, "--policy", "replay/miniwob")


def variant(ws: Path, name: str, edit: Callable[[Path], None], base: str = BASE) -> str:
    """A copy of ``base`` named ``name``, changed by ``edit(directory)``."""
    target = ws / "harnesses" / name
    shutil.copytree(ws / "harnesses" / base, target)
    edit(target)
    spec = yaml.safe_load((target / "harness.yaml").read_text())
    (target / "harness.yaml").write_text(yaml.safe_dump({**spec, "name": name}))
    return name


def function_calling(target: Path) -> None:
    """Turn a copy of miniwob-base to function calling (its ``settings``)."""
    spec = (target / "harness.yaml").read_text()
    assert "function_calling: false" in spec
    (target / "harness.yaml").write_text(
        spec.replace("function_calling: false", "function_calling: true")
    )


def repaired(ws: Path, repair: str, base: str = BASE) -> str:
    """``base`` with the catalogue repair ``repair`` applied, named ``<base>.<repair>``."""
    from harnessctl.envs.miniwob import HERE
    from harnessctl.evolve.patch import apply_blocks, parse_patch, write_files

    spec = yaml.safe_load((HERE / "directions" / "repairs" / f"{repair}.yaml").read_text())

    def edit(target: Path) -> None:
        write_files(target, apply_blocks(target, parse_patch(spec["patch"])))

    return variant(ws, f"{base}.{repair}", edit, base=base)
