"""Test isolation: a temp HOME and workspace, no colour, fixed width, a git identity, and
no provider keys, so tests never touch the developer's machine state."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import BASE_HARNESS, EXAMPLE_SUITE, ROOT
from tests.helpers.workspaces import KEPT_ENV

SLOW_FIXTURES = frozenset({"dbbench_world", "small_pool"})
"""Session fixtures that run an evolve: every test using one is in the slow tier."""
WORLD_FIXTURES = SLOW_FIXTURES | {"miniwob_world", "pool_dir", "world_ws"}
"""Session fixtures whose build is charged to the first test that uses them."""
WORLD_TIMEOUT_S = 900
"""That test's limit (its own and the world's build; the build's commands are bounded by the
same 900 s): the 300 s default is a hung test's, not an evolve's on a loaded machine."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tiers: ``-m "not slow"`` is the fast tier for the edit-test loop (README, "Tests");
    a test is slow when it or its module is marked so, or it uses a costly session fixture.
    A test that may build a session world gets the world's time limit unless it names its own."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if SLOW_FIXTURES & used:
            item.add_marker(pytest.mark.slow)
        if WORLD_FIXTURES & used and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(WORLD_TIMEOUT_S))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Name each failure the moment it happens (pytest names them only at the end): a run
    stopped by a time limit still says which tests had failed by then. On the controlling
    process only (xdist's workers report to it)."""
    if report.failed and not os.environ.get("PYTEST_XDIST_WORKER"):
        import sys

        sys.stderr.write(f"\nFAILED (live) {report.nodeid} ({report.when})\n")
        sys.stderr.flush()


@pytest.fixture(scope="session", autouse=True)
def alfworld_translations(tmp_path_factory):
    """ALFWorld's game translations kept once for the whole session (both test processes):
    each is a pure function of its game, and translating is about half of a game process's
    CPU (harnessctl.envs.alfworld.engine)."""
    from tests.helpers.worlds import shared_dir

    os.environ["HARNESSCTL_ALFWORLD_CACHE"] = str(shared_dir(tmp_path_factory, "alfworld-tr"))
    yield


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for key in list(os.environ):
        if key in KEPT_ENV:  # artifacts (screenshots); the session's translation cache
            continue
        if key.startswith("HARNESSCTL_") or key.endswith("_API_KEY"):
            monkeypatch.delenv(key, raising=False)
    yield


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    """A fresh workspace holding the base harness and the example suite."""
    ws = tmp_path / "ws"
    (ws / "harnesses").mkdir(parents=True)
    shutil.copytree(BASE_HARNESS, ws / "harnesses" / "dbbench-base")
    shutil.copytree(EXAMPLE_SUITE, ws / "examples" / "dbbench")
    (ws / "harnessctl.yaml").write_text("suite: examples/dbbench\nworkers: 2\n")
    monkeypatch.setenv("HARNESSCTL_WORKSPACE", str(ws))
    monkeypatch.chdir(ws)
    return ws


@pytest.fixture
def dbbench_runtime(monkeypatch) -> None:
    """Bind the in-process runtime to DBBench's tools, as a rollout session does in the
    sandbox (``HXRT_ENV``), for tests that run harness hooks without a sandbox."""
    import json

    binding = {
        "kind": "dbbench",
        "surface": "sandbox",
        "package": "harnessctl.envs.dbbench.sandbox.hxenv_dbbench",  # the host-side name
    }
    monkeypatch.setenv("HXRT_ENV", json.dumps(binding))


@pytest.fixture(scope="session")
def small_pool(tmp_path_factory):
    """One small exported DBBench pool (base and two siblings, built on the offline sim
    policy) shared by the trainer integration tests: ``(workspace, pool dir, names)``."""
    from tests.helpers.pools import SMALL_POOL, build_pool
    from tests.helpers.worlds import once_per_session

    def make(where: Path) -> dict:
        ws, out, names = build_pool(where, **SMALL_POOL)
        return {"ws": str(ws), "out": str(out), "names": names}

    made = once_per_session(tmp_path_factory, "smallpool", make)
    return Path(made["ws"]), Path(made["out"]), made["names"]


@pytest.fixture(scope="session")
def docker_engine():
    """A reachable Docker engine with the runtime image built (offline, idempotent); without
    one the docker tests skip, except under CI, where they fail."""
    import subprocess

    from harnessctl.errors import HarnessctlError
    from harnessctl.sandbox.docker import DEFAULT_IMAGE, connect
    from tests.helpers.ci import unavailable

    try:
        client = connect()
    except HarnessctlError as exc:
        unavailable("the docker tests", f"no docker engine: {exc}")
    build = ROOT / "scripts" / "build-runtime-image.sh"
    done = subprocess.run([str(build)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        unavailable(
            "the docker tests",
            f"cannot build {DEFAULT_IMAGE}: {done.stderr.strip()[-500:]}",
        )
    yield client
    client.close()


@pytest.fixture(scope="session")
def dbbench_world(tmp_path_factory):
    """DBBench's test evolve (``worlds.DBBENCH_EVOLVE``) in a workspace as `harnessctl init`
    makes it, run once per session: copy it (``.copy``) or read through it
    (``.read_through``)."""
    from harnessctl.workspace import init_workspace
    from tests.helpers.workspaces import isolate
    from tests.helpers.worlds import DBBENCH_EVOLVE, World, build_world, once_per_session

    def make(where: Path) -> dict:
        root = where / "ws"
        with pytest.MonkeyPatch.context() as mp:
            isolate(mp, where / "home", root)
            init_workspace(root)  # as `harnessctl init` leaves it: nothing uncommitted
            return build_world(root, *DBBENCH_EVOLVE, "--workers", 2).to_json()

    return World.from_json(once_per_session(tmp_path_factory, "world-dbbench", make))
