"""Pools as an attacker ships them (issue #24, findings 1 and 9): a pool is data. Its
checksums are resealed after each change here (anyone can recompute SHA256SUMS), so only the
pool's shape and manifest rules stand between it and the host: a linked directory, a harness
name that walks out of the pool, an environment kind given as an import path.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harnessctl.errors import ConfigError
from harnessctl.harness import load_harness
from harnessctl.pool import Pool, PoolIntegrityError, verify_pool
from harnessctl.pool.api import known_environment, task_from_record
from harnessctl.pool.export import export_pool
from harnessctl.pool.identity import pool_id
from harnessctl.pool.integrity import write_checksums
from harnessctl.trees import tree_hash
from harnessctl.workspace import init_workspace
from tests.helpers.ci import unavailable
from tests.helpers.pools import cli


@pytest.fixture(scope="module")
def workspace_with_pool(tmp_path_factory):
    """A git workspace and a one-harness pool exported from it (no evaluation needed)."""
    root = tmp_path_factory.mktemp("hostile-pool")
    ws = root / "ws"
    init_workspace(ws)
    base = load_harness(ws / "harnesses" / "dbbench-base")
    out = root / "pool"
    export_pool(
        name="p", harnesses=[], base=base, profiles={}, out=out, repo_root=ws,
        policy_id="sim/dbbench", suite="dbbench-dev",
    )  # fmt: skip
    assert verify_pool(out) == []
    return ws, out


@pytest.fixture
def pool(workspace_with_pool, tmp_path):
    """A fresh copy of the exported pool to tamper with: (workspace, pool dir)."""
    import shutil

    ws, out = workspace_with_pool
    shutil.copytree(out, tmp_path / "pool", symlinks=True)
    return ws, tmp_path / "pool"


def manifest(pool_dir: Path) -> dict:
    return json.loads((pool_dir / "pool.json").read_text())


def reseal(pool_dir: Path, data: dict | None = None) -> None:
    """What a forger does after a change: rewrite pool.json (its id recomputed, as anyone
    can) and the checksums."""
    if data is not None:
        data["pool_id"] = pool_id(data["harnesses"])
        (pool_dir / "pool.json").write_text(json.dumps(data, indent=2))
    (pool_dir / "SHA256SUMS").unlink()
    write_checksums(pool_dir)


def verify_cli(ws: Path, pool_dir: Path):
    return cli(ws, "pool", "verify", pool_dir, ok=False)


def test_a_linked_directory_in_a_pool_harness_fails_verification(pool):
    """Finding 1 in pools: the tree hash skipped the link, so the pool verified, and its
    rollouts read the gold labels through it."""
    ws, pool_dir = pool
    link = pool_dir / "harnesses" / "dbbench-base" / "gold"
    os.symlink(ws / "examples" / "dbbench", link)
    reseal(pool_dir)
    proc = verify_cli(ws, pool_dir)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert str(link) in proc.stderr and "a symlink" in proc.stderr
    with pytest.raises(PoolIntegrityError) as err:
        Pool.load(pool_dir)
    assert err.value.path == str(link)


def test_a_linked_checksum_file_is_not_read(pool):
    ws, pool_dir = pool
    (pool_dir / "SHA256SUMS").unlink()
    os.symlink("/etc/hostname", pool_dir / "SHA256SUMS")
    problems = verify_pool(pool_dir)
    assert problems == [
        f"{pool_dir / 'SHA256SUMS'}: a symlink; a pool holds regular files and directories only"
    ]


def test_a_harness_name_with_a_path_fails_verification(pool, tmp_path):
    """Finding 9: ``name: ../..`` loaded a harness from outside the pool, unchecked."""
    ws, pool_dir = pool
    outside = tmp_path / "outside" / "evil"
    import shutil

    shutil.copytree(ws / "harnesses" / "dbbench-base", outside)
    data = manifest(pool_dir)
    rel = os.path.relpath(outside, pool_dir / "harnesses")
    data["harnesses"][0].update(name=rel, hash=tree_hash(outside))
    reseal(pool_dir, data)
    proc = verify_cli(ws, pool_dir)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "harnesses[0].name" in proc.stderr and "not a plain harness name" in proc.stderr
    with pytest.raises(PoolIntegrityError, match=r"harnesses\[0\]\.name"):
        Pool.load(pool_dir)


def test_a_directory_name_other_than_the_harness_name_is_refused(pool):
    ws, pool_dir = pool
    harness = pool_dir / "harnesses" / "dbbench-base"
    (harness / "harness.yaml").write_text(
        (harness / "harness.yaml").read_text().replace("name: dbbench-base", "name: other")
    )
    data = manifest(pool_dir)
    data["harnesses"][0]["hash"] = tree_hash(harness)
    reseal(pool_dir, data)
    with pytest.raises(PoolIntegrityError, match="name 'other' is not 'dbbench-base'"):
        Pool.load(pool_dir)


def set_env(pool_dir: Path, in_manifest: str | None, in_harness: str) -> None:
    harness = pool_dir / "harnesses" / "dbbench-base"
    text = (harness / "harness.yaml").read_text()
    (harness / "harness.yaml").write_text(text.replace("env: dbbench", f"env: {in_harness!r}"))
    data = manifest(pool_dir)
    entry = data["harnesses"][0]
    entry["hash"] = tree_hash(harness)
    if in_manifest is None:
        entry.pop("env")
    else:
        entry["env"] = in_manifest
    reseal(pool_dir, data)


LOAD_AND_RUN = """
import sys
from harnessctl.pool import Pool
pool = Pool.load(sys.argv[1])
pool.session()
pool.route({"question": "q"}, failures=[])
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "in_manifest,in_harness",
    [("os:abort", "os:abort"), ("dbbench", "os:abort"), (None, "os:abort")],
)
def test_an_import_path_as_environment_kind_is_never_imported(pool, in_manifest, in_harness):
    """Finding 9: ``env: "os:abort"`` was imported and called on the host (the process
    aborted) once the pool was used; it passed ``pool verify``."""
    ws, pool_dir = pool
    set_env(pool_dir, in_manifest, in_harness)
    proc = verify_cli(ws, pool_dir)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "never import paths" in proc.stderr
    # a trainer's process that loads the pool and uses it: refused, not aborted
    run = subprocess.run(
        [sys.executable, "-c", LOAD_AND_RUN, str(pool_dir)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1, (run.returncode, run.stderr[-2000:])
    assert "PoolIntegrityError" in run.stderr and "never import paths" in run.stderr


CALLED: list = []


def called_if_imported(**options):
    """What a manifest's ``module:attr`` would run on the host if it were imported."""
    CALLED.append(options)
    return object()


def test_kinds_resolve_by_known_name_only():
    assert known_environment("dbbench").kind == "dbbench"
    path = f"{__name__}:called_if_imported"
    with pytest.raises(ConfigError, match="not a known environment kind"):
        known_environment(path)
    with pytest.raises(ConfigError, match="not a known environment kind"):
        task_from_record({"question": "q"}, env=path)
    assert CALLED == []


def test_an_installed_entry_point_is_a_known_kind():
    if importlib.util.find_spec("toyenv") is None:
        unavailable("the entry-point kind test", "pip install -e examples/toyenv to run this")
    assert known_environment("toy").kind == "toy"


def test_the_untampered_pool_still_loads(pool):
    ws, pool_dir = pool
    proc = verify_cli(ws, pool_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Pool.load(pool_dir) as loaded:
        assert loaded.names == ["dbbench-base"] and loaded.base.spec.manifest.env == "dbbench"


def test_export_refuses_a_harness_with_a_link(tmp_path):
    ws = tmp_path / "ws"
    init_workspace(ws)
    link = ws / "harnesses" / "dbbench-base" / "gold"
    os.symlink(ws / "examples" / "dbbench", link)
    proc = cli(ws, "export-pool", "dbbench-base", "--out", tmp_path / "p", ok=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(link) in proc.stderr and "a symlink" in proc.stderr
    assert not (tmp_path / "p").exists() and not (tmp_path / "p.tar.gz").exists()
