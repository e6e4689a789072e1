"""``harnessctl export-pool``: freeze harnesses, their profiles and the router config."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import HarnessctlError
from ..harness import HarnessSpec, load_harness
from ..records import Profile
from ..runtime import PROTOCOL_VERSION
from ..trees import copy_tree
from .identity import SCHEMA_VERSION, file_sha256, pool_id
from .integrity import MANIFEST, write_checksums

DEFAULT_ROUTER = {"kind": "profile-rescue", "smoothing_prior": 2.0, "k": 3, "voters": []}


def _git_commit(repo_root: Path, path: Path) -> str | None:
    """The last commit touching ``path``; refuses uncommitted changes in it."""
    import git

    try:
        repo = git.Repo(repo_root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise HarnessctlError(f"{repo_root} is not a git repository") from None
    rel = path.resolve().relative_to(Path(str(repo.working_tree_dir)).resolve()).as_posix()
    if repo.git.status("--porcelain", "--", rel).strip():
        raise HarnessctlError(f"{path}: uncommitted changes; commit them before exporting")
    commits = list(repo.iter_commits(paths=rel, max_count=1))
    if not commits:
        raise HarnessctlError(f"{path}: not committed; commit it before exporting")
    return commits[0].hexsha


def check_committed(repo_root: Path, specs: list[HarnessSpec]) -> dict[str, str | None]:
    """The commit of each harness; a harness with uncommitted changes is an error."""
    return {spec.name: _git_commit(repo_root, spec.path) for spec in specs}


def reproducible(
    harnesses: list[HarnessSpec], reproductions: dict[str, dict], *, include: bool = False
) -> tuple[list[HarnessSpec], dict[str, str]]:
    """The siblings a pool takes, and those it leaves out with the reason: a sibling whose
    accepted edit's claimed rescues reproduce no better than the null baseline
    (:func:`harnessctl.evolve.reproduce.verdict_of`) is left out unless ``include``."""
    from ..evolve.reproduce import verdict_of

    kept, left_out = [], {}
    for spec in harnesses:
        summary = reproductions.get(spec.name)
        if verdict_of(summary) == "unreproduced" and not include:
            assert summary is not None
            null = summary.get("null") or [0, 0]
            left_out[spec.name] = (
                f"its claimed rescues reproduce {summary['reproduced']}/{summary['tested']}, "
                f"no better than its parent tried again ({null[0]}/{null[1]})"
            )
        else:
            kept.append(spec)
    return kept, left_out


def export_pool(
    *,
    name: str,
    harnesses: list[HarnessSpec],
    base: HarnessSpec,
    profiles: dict[str, Profile],
    out: Path,
    repo_root: Path,
    policy_id: str,
    suite: str,
    router: dict | None = None,
    reproductions: dict[str, dict] | None = None,
) -> Path:
    """Write the pool directory and ``<out>.tar.gz``; returns the directory. Each harness's
    entry carries its edit's reproduction summary (``reproductions``, by name) where it has
    one: a trainer can see which rescues were re-tested."""
    if out.exists() and any(out.iterdir()):
        raise HarnessctlError(f"{out}: exists and is not empty")
    specs = {h.name: h for h in [base, *harnesses]}
    commits = check_committed(repo_root, list(specs.values()))
    entries: list[dict[str, Any]] = []
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "harnesses").mkdir(parents=True)
    (tmp / "profiles").mkdir()
    for hname, spec in specs.items():
        commit = commits[hname]
        copy_tree(spec.path, tmp / "harnesses" / hname, expect=spec.hash)  # as hashed
        profile = profiles.get(hname)
        frozen = None
        if profile is not None:
            path = tmp / "profiles" / f"{hname}.json"
            path.write_text(
                json.dumps(profile.dump(), indent=1, sort_keys=True) + "\n", encoding="utf-8"
            )  # the id covers its split and these bytes (identity.pool_id)
            frozen = {**_summary(profile), "split": profile.split, "sha256": file_sha256(path)}
        entries.append(
            {
                "name": hname,
                "role": "base" if spec.hash == base.hash else "aux",
                "hash": spec.hash,
                "git_commit": commit,
                "parent": spec.manifest.parent,
                "direction": spec.manifest.direction,
                "edit_id": spec.manifest.edit_id,
                "env": spec.manifest.env,
                "runtime": {"protocol": PROTOCOL_VERSION, "python": "3.8+ standard library"},
                "profile": frozen,
                "reproduction": (reproductions or {}).get(hname),
            }
        )
    manifest = {
        "version": SCHEMA_VERSION,
        "name": name,
        "pool_id": pool_id(entries),
        "harnessctl_version": __version__,
        "created_at": round(time.time()),
        "policy": policy_id,
        "suite": suite,
        "harnesses": sorted(entries, key=lambda e: (e["role"] != "base", e["name"])),
        "router": router or DEFAULT_ROUTER,
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    write_checksums(tmp)
    for spec in specs.values():  # the copy must be what was hashed
        if load_harness(tmp / "harnesses" / spec.name).hash != spec.hash:
            raise HarnessctlError(f"{spec.path}: changed while exporting")
    tmp.rename(out)
    write_archive(out, out.with_name(out.name + ".tar.gz"))
    return out


def _summary(profile: Profile) -> dict[str, Any]:
    """What ``pool.json`` says of a harness's profile (the full one is in ``profiles/``)."""
    rescue = profile.rescue
    return {
        "success": profile.success.model_dump(mode="json"),
        "rescue": {
            "count": rescue.count,
            "opportunities": rescue.opportunities,
            "rate": rescue.rate,
        },
        "card": None if profile.card is None else profile.card.model_dump(mode="json"),
    }


def write_archive(src: Path, dest: Path) -> None:
    """A reproducible tar.gz (sorted names, zero mtimes and owners)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=9) as tar:
        for path in sorted(src.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=f"{src.name}/{path.relative_to(src)}")
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if path.is_file():
                with open(path, "rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    dest.write_bytes(buf.getvalue())
