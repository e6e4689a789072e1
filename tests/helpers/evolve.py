"""A git-initialised copy of the example workspace and an eval request over it: the setup
shared by the evolve, edit-reward and call-log tests."""

from __future__ import annotations

from pathlib import Path

from harnessctl.harness import HarnessSpec, load_harness
from harnessctl.policy import Policy
from harnessctl.run.evaluate import EvalRequest
from harnessctl.sandbox import Limits
from harnessctl.suite import load_suite
from harnessctl.vcs import ensure_repo
from harnessctl.workspace import Workspace, load_workspace
from tests.helpers import ROOT


def committed_workspace_eval(
    workspace: Path, *, split: str, timeout_s: float = 20
) -> tuple[Workspace, HarnessSpec, EvalRequest]:
    """Commit ``workspace`` (the store ignored) and an EvalRequest of dbbench-base on
    ``split`` with the sim, one rollout per task."""
    (workspace / ".gitignore").write_text(".harnessctl/\n")
    ensure_repo(workspace, message="workspace")
    ws = load_workspace(workspace)
    base = load_harness(ws.harnesses_dir / "dbbench-base")
    evaluation = EvalRequest(
        harness=base,
        suite=load_suite(ws.root / "examples" / "dbbench"),
        split=split,
        policy=Policy("sim/dbbench"),
        rollouts=1,
        workers=2,
        limits=Limits(timeout_s=timeout_s),
    )
    return ws, base, evaluation


def example_workspace(path: Path) -> Path:
    """A workspace at ``path`` holding the base harness and the example suite (what the
    ``workspace`` fixture makes), for fixtures broader than one test."""
    import shutil

    root = ROOT
    (path / "harnesses").mkdir(parents=True)
    shutil.copytree(root / "harnesses" / "dbbench-base", path / "harnesses" / "dbbench-base")
    shutil.copytree(root / "examples" / "dbbench", path / "examples" / "dbbench")
    (path / "harnessctl.yaml").write_text("suite: examples/dbbench\nworkers: 2\n")
    return path


def isolate(mp, home: Path) -> None:
    """What the autouse ``isolated_env`` fixture sets, on a ``pytest.MonkeyPatch`` of a
    fixture broader than one test."""
    import os

    for key in list(os.environ):
        if key.startswith("HARNESSCTL_") or key.endswith("_API_KEY"):
            mp.delenv(key)
    mp.setenv("HOME", str(home))
    mp.setenv("NO_COLOR", "1")
    mp.setenv("COLUMNS", "120")
    mp.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for var in ("GIT_AUTHOR", "GIT_COMMITTER"):
        mp.setenv(f"{var}_NAME", "Test")
        mp.setenv(f"{var}_EMAIL", "test@example.invalid")
