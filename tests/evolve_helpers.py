"""A git-initialised copy of the example workspace and an eval request over it: the setup
shared by the evolve, edit-reward and call-log tests."""

from __future__ import annotations

from pathlib import Path

from harnessctl.evaluate import EvalRequest
from harnessctl.harness import HarnessSpec, load_harness
from harnessctl.policy import Policy
from harnessctl.sandbox import Limits
from harnessctl.suite import load_suite
from harnessctl.vcs import ensure_repo
from harnessctl.workspace import Workspace, load_workspace


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
