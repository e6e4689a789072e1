"""Harness trees as an attacker shapes them (issue #24, findings 1 and 8): a directory
linked to the suite's gold labels, a FIFO, files in the caches the hash skips. One rule holds
everywhere (harnessctl/trees.py): regular files and directories only, nothing followed, and
what crosses into a sandbox, a child harness, a git commit or a pool is exactly what was
hashed. The sandbox tests run a real rollout on both backends (bubblewrap and docker).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from harnessctl.errors import ConfigError, HarnessctlError
from harnessctl.evolve.directions import catalogue
from harnessctl.evolve.validate import build_child
from harnessctl.harness import load_harness
from harnessctl.policy import Policy
from harnessctl.run.session import RolloutSession
from harnessctl.sandbox import Limits
from harnessctl.sandbox.local import LocalSandbox
from harnessctl.suite import load_suite
from harnessctl.trees import copy_tree, read_tree, tree_hash
from tests.helpers import ROOT
from tests.helpers.cli import invoke, task_flags

SUITE = ROOT / "examples" / "dbbench"
BASE = ROOT / "harnesses" / "dbbench-base"
HOOK = "return messages + self.history(state)"

# Extra files in every place the hash leaves out: none of them may reach a sandbox.
EXCLUDED = {
    ".pytest_cache/evil.py": "VALUE = 'imported from a cache the hash skips'\n",
    ".mypy_cache/3.11/evil.py": "VALUE = 'mypy'\n",
    ".git/config": "[core]\n",
    "__pycache__/evil.cpython-311.pyc": "not really bytecode",
    "prompts/stray.pyc": "not really bytecode",
}

# Run at the first model call, in the sandbox: what the harness directory holds, and whether
# code planted in .pytest_cache/ (finding 8) can be imported.
LISTING = r"""

import json as _json, os as _os, sys as _sys


def _report_tree(state):
    root = _os.environ["HXRT_HARNESS_DIR"]
    seen = []
    for dirpath, dirnames, filenames in _os.walk(root):
        for name in dirnames + filenames:
            path = _os.path.join(dirpath, name)
            if _os.path.islink(path) or not _os.path.isdir(path):
                seen.append(_os.path.relpath(path, root))
    _sys.path.insert(0, _os.path.join(root, ".pytest_cache"))
    try:
        import evil
        imported = evil.VALUE
    except ImportError as exc:
        imported = "blocked:" + type(exc).__name__
    raise RuntimeError("TREE " + _json.dumps({"files": sorted(seen), "imported": imported}))
"""


def make_harness(dst: Path, name: str, *, code: str = "", call: str = "") -> Path:
    shutil.copytree(BASE, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
    harness = dst / name
    if code:
        text = (harness / "harness.py").read_text()
        assert HOOK in text
        (harness / "harness.py").write_text(text.replace(HOOK, f"{call}\n        {HOOK}") + code)
    manifest = (harness / "harness.yaml").read_text().replace("dbbench-base", name)
    (harness / "harness.yaml").write_text(manifest)
    return harness


def plant_excluded(harness: Path) -> None:
    for rel, content in EXCLUDED.items():
        (harness / rel).parent.mkdir(parents=True, exist_ok=True)
        (harness / rel).write_text(content)


# --- the rule itself ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "where",
    ["gold", "prompts/deeper/gold", "prompts/hostname.md", "fifo", "socket"],
)
def test_a_link_or_special_file_anywhere_is_refused_by_its_path(tmp_path, where):
    harness = make_harness(tmp_path, "hostile")
    path = harness / where
    path.parent.mkdir(parents=True, exist_ok=True)
    if where == "fifo":
        os.mkfifo(path)  # reading it by name would block the host
    elif where == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    elif where.endswith(".md"):
        os.symlink("/etc/hostname", path)
    else:  # a directory linked to the suite's gold labels (finding 1)
        os.symlink(SUITE, path)
    with pytest.raises(ConfigError) as err:
        load_harness(harness)
    assert err.value.where == str(path)
    assert "regular files and directories only" in err.value.message
    with pytest.raises(ConfigError):
        copy_tree(harness, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


def test_excluded_names_are_neither_hashed_nor_copied(tmp_path):
    clean = make_harness(tmp_path, "clean")
    dirty = make_harness(tmp_path, "dirty")
    (dirty / "harness.yaml").write_text((clean / "harness.yaml").read_text())
    plant_excluded(dirty)
    os.symlink("/etc", dirty / "prompts" / ".git")  # an excluded name is never looked into
    assert tree_hash(dirty) == tree_hash(clean)
    digest = copy_tree(dirty, tmp_path / "copy")
    assert digest == tree_hash(clean) == tree_hash(tmp_path / "copy")
    copied = sorted(
        p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*")
    )
    files = [f.rel for f in read_tree(clean)]
    dirs = sorted({Path(f).parent.as_posix() for f in files} - {"."})
    assert copied == sorted(files + dirs)  # exactly the hashed files and their directories
    # the entry must be a file of the tree: one in an excluded directory is not
    manifest = dirty / "harness.yaml"
    manifest.write_text(manifest.read_text() + "entry: .pytest_cache/evil.py:Harness\n")
    with pytest.raises(ConfigError, match="not a file of the harness"):
        load_harness(dirty)


def test_a_copy_refuses_a_tree_that_changed_since_it_was_hashed(tmp_path):
    harness = make_harness(tmp_path, "h")
    digest = tree_hash(harness)
    (harness / "prompts" / "system.md").write_text("changed\n")
    with pytest.raises(HarnessctlError, match="changed since it was loaded"):
        copy_tree(harness, tmp_path / "copy", expect=digest)
    assert not (tmp_path / "copy").exists()


# --- both sandboxes ------------------------------------------------------------------------
BACKENDS = ["local", "docker"]


@pytest.fixture
def backend(request):
    name = request.param
    if name == "docker":
        request.getfixturevalue("docker_engine")
    else:
        sandbox = LocalSandbox()
        sandbox.start(None)
        try:
            isolated = sandbox.fs_isolated
        finally:
            sandbox.close()
        if not isolated and not os.environ.get("CI"):
            pytest.skip("bubblewrap cannot run here")
        assert isolated, "bubblewrap is installed but cannot run (CI must not skip this)"
    return name


def one_rollout(backend: str, spec, task_id: str = "dev-000"):
    suite = load_suite(SUITE)
    task = suite.tasks("dev").by_id()[task_id]
    with RolloutSession(suite.environment, sandbox=backend, limits=Limits(timeout_s=30)) as session:
        return session.run(spec, task, 0, Policy("sim/dbbench"))


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_what_crosses_into_the_sandbox_is_what_was_hashed(tmp_path, backend):
    """Finding 8: code in .pytest_cache/ (and the other skipped places) was copied and
    importable, and changing it kept the hash. Now the sandbox's copy holds exactly the
    files the hash covers."""
    harness = make_harness(tmp_path, "tree-probe", code=LISTING, call="_report_tree(state)")
    plant_excluded(harness)
    spec = load_harness(harness)
    rec = one_rollout(backend, spec)
    assert rec.outcome.value == "harness_error" and "TREE " in (rec.error or ""), rec.error
    seen = json.loads(rec.error.split("TREE ", 1)[1])
    assert seen["files"] == sorted(f.rel for f in read_tree(harness))
    assert seen["imported"] == "blocked:ModuleNotFoundError"
    (harness / ".pytest_cache" / "evil.py").write_text("VALUE = 'changed'\n")
    assert load_harness(harness).hash == spec.hash  # the same hash: and the same bytes run


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_link_added_after_loading_never_crosses(tmp_path, backend):
    """Finding 1 at the copy: a directory linked to the gold labels after the harness was
    loaded (hashed) is not followed into the sandbox: the copy is refused, nothing runs."""
    spec = load_harness(make_harness(tmp_path, "late-link"))
    os.symlink(SUITE, spec.path / "gold")
    with pytest.raises(ConfigError) as err:
        one_rollout(backend, spec)
    assert err.value.where == str(spec.path / "gold")
    os.unlink(spec.path / "gold")
    (spec.path / "prompts" / "system.md").write_text("changed after loading\n")
    with pytest.raises(HarnessctlError, match="changed since it was loaded"):
        one_rollout(backend, spec)


# --- the CLI, evolve and its commit ---------------------------------------------------------
def test_eval_refuses_a_harness_with_a_linked_directory(workspace):
    harness = make_harness(workspace / "harnesses", "linked")
    os.symlink(workspace / "examples" / "dbbench", harness / "gold")
    result = invoke("eval", "linked", "--sandbox", "local", *task_flags(["dev-000"]))
    assert result.exit_code == 2, result.output
    assert str(harness / "gold") in result.output and "a symlink" in result.output
    assert not (workspace / ".harnessctl" / "trajectories").exists()  # nothing ran


def test_evolve_refuses_a_linked_base_and_commits_nothing(tmp_path, monkeypatch):
    from harnessctl.workspace import init_workspace

    ws = tmp_path / "ws"
    init_workspace(ws)
    harness = ws / "harnesses" / "dbbench-base"
    os.symlink(ws / "examples" / "dbbench", harness / "gold")
    subprocess.run(["git", "add", "-A"], cwd=ws, check=True)
    subprocess.run(["git", "commit", "-qm", "link"], cwd=ws, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True)
    harnesses = sorted(p.name for p in (ws / "harnesses").iterdir())
    monkeypatch.setenv("HARNESSCTL_WORKSPACE", str(ws))
    monkeypatch.chdir(ws)
    result = invoke(
        "evolve", "dbbench-base", "--rounds", "1", "--directions", "execution-recovery",
        "--rollouts", "1",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert str(harness / "gold") in result.output and "a symlink" in result.output
    after = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True)
    assert after.stdout == head.stdout  # no child committed
    assert sorted(p.name for p in (ws / "harnesses").iterdir()) == harnesses


def test_a_child_is_built_from_the_hashed_files_only(tmp_path):
    """Evolve's child copy (then committed) follows no link and copies no skipped file."""
    harness = make_harness(tmp_path, "parent")
    plant_excluded(harness)
    parent = load_harness(harness)
    line = "Your input will be raw MySQL response, you have to deal with it by yourself.\n"
    prompt = "prompts/big_prompt.md"
    patch = f"{prompt}\n<<<<<<< SEARCH\n{line}=======\nRaw rows.\n>>>>>>> REPLACE\n"
    direction = catalogue("dbbench")["context-construction"]
    child, _, _ = build_child(parent, direction, patch, tmp_path / "child", {"name": "child"})
    expected = {f.rel for f in read_tree(harness)}
    assert {p.relative_to(child.path).as_posix() for p in child.path.rglob("*") if p.is_file()} == (
        expected
    )
    os.symlink(SUITE, harness / "gold")  # after the parent was loaded
    with pytest.raises(ConfigError) as err:
        build_child(parent, direction, patch, tmp_path / "child2", {"name": "child2"})
    assert err.value.where == str(harness / "gold")
    assert not (tmp_path / "child2" / "gold").exists()
