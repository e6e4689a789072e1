"""Reviewable YAML: ``profiles/<harness>/<policy-slug>/<suite>.<split>.yaml`` and the pool's
rescue matrix in ``profiles/_matrix/<policy-slug>/<suite>.<split>.yaml``.

Stable output: keys sorted, lists already sorted by the builder, floats rounded, no
timestamps or row ids in the file, so re-profiling an unchanged harness writes the same
bytes and a changed one shows a readable diff.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..records import Profile, RescueMatrix

MATRIX_DIR = "_matrix"  # not a valid harness name (names start with a letter or digit)


def slug(text: str) -> str:
    """A path-safe slug of a policy id or suite name."""
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-") or "policy"


def dump(data: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False, width=100)


def profile_path(root: Path, profile: Profile) -> Path:
    policy, suite = slug(profile.policy.id), slug(profile.suite.name)
    return root / profile.harness.name / policy / f"{suite}.{slug(profile.split)}.yaml"


def write_profile(root: Path, profile: Profile) -> Path:
    """Write one profile; return its path."""
    path = profile_path(root, profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump(profile.dump()), encoding="utf-8")
    return path


def read_profile(path: Path) -> Profile:
    """A profile YAML file, validated: a ConfigError names the file and the bad field."""
    from ..harness import read_yaml

    return Profile.load(read_yaml(path), where=str(path))


def write_matrix(
    root: Path, matrix: RescueMatrix, *, policy_id: str, suite: str, split: str
) -> Path:
    """Write the pool's rescue matrix; return its path."""
    path = root / MATRIX_DIR / slug(policy_id) / f"{slug(suite)}.{slug(split)}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"policy": policy_id, "suite": suite, "split": split, **matrix.model_dump()}
    path.write_text(dump(payload), encoding="utf-8")
    return path
