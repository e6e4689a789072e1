"""The code's own gates, in the test run CI makes: ruff on the whole checkout and mypy on the
whole package (the sandbox runtime included), both configured in pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:  # the test extra installs both
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


def test_ruff_is_clean() -> None:
    proc = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.mark.slow
def test_mypy_is_clean_on_the_whole_package(tmp_path) -> None:
    proc = subprocess.run(
        [_tool("mypy"), "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
