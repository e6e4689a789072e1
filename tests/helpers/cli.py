"""The CLI in-process (typer's runner), as the tests drive it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from harnessctl.cli import app
from harnessctl.workspace import load_workspace

runner = CliRunner()
TASKS = ["dev-000", "dev-004", "dev-020", "dev-030", "dev-045", "dev-055"]
"""Six DBBench dev tasks, two of each category."""


def invoke(*args):
    """The CLI in the current workspace (``HARNESSCTL_WORKSPACE`` or the working directory)."""
    return runner.invoke(app, [str(a) for a in args])


def eval_json(*args):
    """`harnessctl eval --json`, failing with the CLI's whole output if it printed no JSON."""
    result = invoke("eval", *args, "--json")
    assert result.exit_code in (0, 1, 3) and "{" in result.stdout, result.output
    return result, json.loads(result.stdout[result.stdout.index("{") :])


def cli(ws: Path, *args, code: int | None = 0):
    """Run the CLI in-process in ``ws``; the result (asserting the exit code unless None)."""
    result = runner.invoke(app, [str(a) for a in args], env={"HARNESSCTL_WORKSPACE": str(ws)})
    if code is not None:
        assert result.exit_code == code, result.output[-3000:]
    return result


def cli_json(ws: Path, *args, code: int | None = 0) -> dict:
    result = cli(ws, *args, "--json", code=code)
    return json.loads(result.stdout[result.stdout.index("{") :])


def task_flags(ids=TASKS):
    return [x for t in ids for x in ("--task", t)]


def rows(workspace):
    return load_workspace(workspace).open_store().rollouts()


def make_variant(workspace, name, replace_old, replace_new):
    """A copy of ``dbbench-base`` named ``name`` with one replacement in its harness.py."""
    src = workspace / "harnesses" / "dbbench-base"
    dst = workspace / "harnesses" / name
    shutil.copytree(src, dst)
    code = (dst / "harness.py").read_text()
    assert replace_old in code
    (dst / "harness.py").write_text(code.replace(replace_old, replace_new))
    manifest = (dst / "harness.yaml").read_text().replace("dbbench-base", name)
    (dst / "harness.yaml").write_text(manifest)
    return dst
