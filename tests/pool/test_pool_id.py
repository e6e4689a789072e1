"""A pool's id covers what it froze (issue #56): the harness trees and each frozen profile's
split and content. Pools are exported from a fresh workspace with profiles made by hand, so
no evaluation runs; ``pool verify`` recomputes the id and names an altered profile."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harnessctl.harness import load_harness
from harnessctl.pool import Pool, PoolIntegrityError, verify_pool
from harnessctl.pool.export import export_pool
from harnessctl.pool.identity import SCHEMA_VERSION, file_sha256, pool_id, trees_pool_id
from harnessctl.pool.integrity import write_checksums
from harnessctl.records import Profile
from harnessctl.workspace import init_workspace
from tests.helpers.pools import cli
from tests.helpers.profiles import routable_profile

BASE, AUX = "dbbench-base", "dbbench-fc"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A git workspace as `harnessctl init` leaves it (every bundled base committed)."""
    ws = tmp_path_factory.mktemp("pool-id") / "ws"
    init_workspace(ws)
    return ws


def profiles(split: str = "train", rescued: int = 3) -> dict[str, Profile]:
    return {
        BASE: routable_profile(BASE, (0, 0)).model_copy(update={"split": split}),
        AUX: routable_profile(AUX, (rescued, 10)).model_copy(update={"split": split}),
    }


def export(ws: Path, out: Path, frozen: dict[str, Profile]) -> dict:
    """Export BASE and AUX with ``frozen`` profiles to ``out``; its manifest."""
    base, aux = (load_harness(ws / "harnesses" / n) for n in (BASE, AUX))
    export_pool(
        name="p", harnesses=[aux], base=base, profiles=frozen, out=out, repo_root=ws,
        policy_id="sim/dbbench", suite="dbbench-dev",
    )  # fmt: skip
    assert verify_pool(out) == []
    return json.loads((out / "pool.json").read_text())


def reseal(pool_dir: Path, data: dict | None = None) -> None:
    """What a forger does after a change: rewrite pool.json and the checksums."""
    if data is not None:
        (pool_dir / "pool.json").write_text(json.dumps(data, indent=2))
    (pool_dir / "SHA256SUMS").unlink()
    write_checksums(pool_dir)


def test_the_id_covers_the_profiles_split_and_content(workspace, tmp_path):
    train = export(workspace, tmp_path / "train", profiles("train"))
    again = export(workspace, tmp_path / "again", profiles("train"))
    test = export(workspace, tmp_path / "test", profiles("test"))
    other = export(workspace, tmp_path / "other", profiles("train", rescued=4))
    bare = export(workspace, tmp_path / "bare", {})
    assert train["version"] == SCHEMA_VERSION == 3
    assert train["pool_id"] == again["pool_id"]  # the same inputs: the same id
    ids = [m["pool_id"] for m in (train, test, other, bare)]
    assert len(set(ids)) == 4, ids  # another split, other content, no profiles
    # the trees alone, as the id was before: all four alike
    assert {trees_pool_id([h["hash"] for h in m["harnesses"]]) for m in (train, test, bare)} == {
        trees_pool_id([h["hash"] for h in train["harnesses"]])
    }
    entry = next(h for h in train["harnesses"] if h["name"] == AUX)
    assert entry["profile"]["split"] == "train" and len(entry["profile"]["sha256"]) == 64
    assert entry["profile"]["rescue"]["count"] == 0  # the summary is still there
    assert pool_id(train["harnesses"]) == train["pool_id"]
    with Pool.load(tmp_path / "test") as pool:
        assert pool.id == test["pool_id"] and pool.profiles()[AUX].split == "test"


def test_verify_names_an_altered_profile(workspace, tmp_path):
    out = tmp_path / "p"
    original = export(workspace, out, profiles("train"))
    path = out / "profiles" / f"{AUX}.json"
    data = json.loads(path.read_text())
    data["split"] = "test"
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    # the checksums alone name it
    assert any(str(path) in p and "checksum mismatch" in p for p in verify_pool(out))
    # resealed, pool.json's account of the profile still names it
    reseal(out)
    problems = verify_pool(out)
    assert problems == [
        f"{path}: content differs from harnesses[1].profile.sha256 in pool.json "
        "(altered after export)"
    ]
    proc = cli(workspace, "pool", "verify", out, ok=False)
    assert proc.returncode == 1 and str(path) in proc.stderr.replace("\n", ""), proc.stderr
    with pytest.raises(PoolIntegrityError) as err:
        Pool.load(out)
    assert err.value.path == str(path)
    # the entry rewritten to match the file: the split it states is checked, and the id
    manifest = json.loads((out / "pool.json").read_text())
    entry = manifest["harnesses"][1]
    entry["profile"]["sha256"] = file_sha256(path)
    reseal(out, manifest)
    assert verify_pool(out) == [
        f"{path}: split 'test' is not harnesses[1].profile.split 'train' in pool.json"
    ]
    entry["profile"]["split"] = "test"
    reseal(out, manifest)
    assert verify_pool(out) == [
        f"{out / 'pool.json'}: pool_id: {original['pool_id']!r} is not the id of what the "
        f"pool freezes ({pool_id(manifest['harnesses'])}); altered after export"
    ]
    # only a new id makes it verify: the altered pool is another pool
    manifest["pool_id"] = pool_id(manifest["harnesses"])
    reseal(out, manifest)
    assert verify_pool(out) == [] and manifest["pool_id"] != original["pool_id"]


def test_a_profile_pool_json_does_not_freeze_is_named(workspace, tmp_path):
    out = tmp_path / "p"
    export(workspace, out, {})
    stray = out / "profiles" / f"{AUX}.json"
    stray.write_text(json.dumps(profiles()[AUX].dump()))
    reseal(out)
    assert verify_pool(out) == [
        f"{stray}: a profile pool.json does not freeze (harnesses[1].profile is null)"
    ]


def older(manifest: dict, version: int) -> dict:
    """``manifest`` as harnessctl wrote it at ``version`` 1 or 2: no profile split or
    digest, an id of the trees only."""
    data = json.loads(json.dumps(manifest))
    del data["version"]
    data["schema_version" if version == 1 else "version"] = version
    for entry in data["harnesses"]:
        if entry["profile"] is not None:
            del entry["profile"]["split"], entry["profile"]["sha256"]
    data["pool_id"] = trees_pool_id([e["hash"] for e in data["harnesses"]])
    return data


def test_an_older_pool_still_verifies_and_says_its_id_covers_the_trees(workspace, tmp_path):
    out = tmp_path / "p"
    manifest = export(workspace, out, profiles("train"))
    for version in (1, 2):
        copy = tmp_path / f"v{version}"
        shutil.copytree(out, copy)
        reseal(copy, older(manifest, version))
        assert verify_pool(copy) == []
        with Pool.load(copy) as pool:
            assert sorted(pool.names) == [BASE, AUX] and pool.profiles()[AUX].split == "train"
    shown = cli(workspace, "pool", "verify", tmp_path / "v2").stdout
    assert "covers the harness trees, not the profiles" in shown.replace("\n", " ")
    assert "not the profiles" not in cli(workspace, "pool", "verify", out).stdout
    # an older id is still checked, by the rule it was written under
    forged = older(manifest, 2) | {"pool_id": "0" * 16}
    reseal(tmp_path / "v2", forged)
    assert verify_pool(tmp_path / "v2") == [
        f"{tmp_path / 'v2' / 'pool.json'}: pool_id: '{'0' * 16}' is not the id of what the "
        f"pool freezes ({manifest_trees_id(manifest)}); altered after export"
    ]


def manifest_trees_id(manifest: dict) -> str:
    return trees_pool_id([e["hash"] for e in manifest["harnesses"]])
