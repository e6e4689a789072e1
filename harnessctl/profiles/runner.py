"""Profile a pool of harnesses: evaluate (cached), build, write YAML, store; load them back."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import HarnessctlError
from ..harness import HarnessSpec
from ..records import (
    HarnessRef,
    Profile,
    ProfileHarness,
    ProfilePolicy,
    ReanchorInfo,
    RescueMatrix,
    SuiteRef,
)
from ..run.evaluate import EvalRequest, Progress, evaluate
from ..run.group import run_group
from .build import build_profile, rescue_matrix
from .card import behavior_card


@dataclass
class PoolProfiles:
    """What ``profile_pool`` produced: profiles by harness name (base included)."""

    base: str
    profiles: dict[str, Profile]
    matrix: RescueMatrix
    rows: dict[str, list]
    profile_ids: dict[str, str] = field(default_factory=dict)
    paths: list[Path] = field(default_factory=list)


def _ident(spec: HarnessSpec) -> ProfileHarness:
    m = spec.manifest
    return ProfileHarness(
        name=spec.name,
        hash=spec.hash,
        parent=m.parent,
        direction=m.direction,
        description=m.description,
    )


def profile_pool(
    harnesses: list[HarnessSpec],
    base: HarnessSpec,
    template: EvalRequest,
    store,
    *,
    out_dir: Path | None = None,
    reanchor: ReanchorInfo | None = None,
    progress: Progress | None = None,
) -> PoolProfiles:
    """Evaluate ``base`` and every harness with ``template``'s suite, split, policy, seeds
    (and task ids, if set), build their profiles and cards, the rescue matrix, record them in
    the store (each becomes the current profile of its key) and write YAML to ``out_dir``.
    ``reanchor``: the profiles are of kind ``reanchor``, built on that sample."""
    from ..store import ProfileRow
    from .files import write_matrix, write_profile

    specs = {base.name: base}
    for spec in harnesses:
        specs.setdefault(spec.name, spec)
    rows: dict[str, list] = {}
    with run_group(store, template, "profile", base) as group:  # one run, each eval under it
        for name, spec in specs.items():
            result = evaluate(group.child(replace(template, harness=spec)), store, progress)
            rows[name] = result.complete(name).rows
            if name == base.name:
                group.stand_on(rows[name])
    policy = ProfilePolicy(
        id=template.policy.id,
        model=template.policy.model,
        params=dict(sorted(template.policy.params.items())),
    )
    suite = SuiteRef(name=template.suite.name, id=template.suite.id)
    profiles: dict[str, Profile] = {}
    for name, spec in specs.items():
        profiles[name] = build_profile(
            rows[name],
            rows[base.name],
            harness=_ident(spec),
            base=HarnessRef(name=base.name, hash=base.hash),
            policy=policy,
            suite=suite,
            split=template.split,
            reanchor=reanchor,
        )
    reproductions = edit_reproductions(store, list(specs.values()))
    for name, profile in profiles.items():
        profile.card = behavior_card(profile, profiles[base.name])
        profile.harness.reproduction = reproductions.get(name)
    matrix = rescue_matrix(list(profiles.values()))
    out = PoolProfiles(base.name, profiles, matrix, rows)
    for name, spec in specs.items():
        row = store.record_profile(
            ProfileRow(
                harness_hash=spec.hash,
                harness_name=name,
                policy_id=template.policy.id,
                suite=template.suite.name,
                split=template.split,
                kind=profiles[name].kind,
                data_json=json.dumps(profiles[name].dump(), sort_keys=True),
                created_at=time.time(),
            )
        )
        out.profile_ids[name] = row.id
        if out_dir is not None:
            out.paths.append(write_profile(out_dir, profiles[name]))
    if out_dir is not None:
        out.paths.append(
            write_matrix(
                out_dir,
                matrix,
                policy_id=template.policy.id,
                suite=template.suite.name,
                split=template.split,
            )
        )
    return out


def load_profiles(
    store,
    specs: list[HarnessSpec],
    *,
    policy_id: str,
    suite: str,
    split: str | None = None,
) -> dict[str, Profile]:
    """The current profile of each harness under ``policy_id`` on ``suite``, by name (each
    says its ``split``: callers print it).

    ``split``: that split's profiles only (a router reads one split for all candidates:
    :func:`harnessctl.profiles.evidence.read_evidence` chooses it). Otherwise each harness's
    own: full profiles over re-anchoring samples, then the newest. A harness without a
    profile is an error.
    """
    found: dict[str, Profile] = {}
    for spec in specs:
        rows = store.profiles(harness_hash=spec.hash, policy_id=policy_id, suite=suite)
        if split is not None:
            rows = [r for r in rows if r.split == split]
        if not rows:
            on = f"suite {suite}" + (f" split {split}" if split is not None else "")
            raise HarnessctlError(
                f"no profile of {spec.name} ({spec.hash[:12]}) under policy {policy_id} on "
                f"{on}: run `harnessctl profile` first"
            )
        best = max(rows, key=lambda r: (r.kind == "full", r.created_at))
        found[spec.name] = stored_profile(best)
    return found


def stored_profile(row: Any) -> Profile:
    """The profile a store row (``ProfileRow``) holds, validated; a malformed or newer-version
    one raises a ConfigError naming the row."""
    where = (
        f"stored profile {row.id} of {row.harness_name} ({row.policy_id}, {row.suite}/{row.split})"
    )
    return Profile.load(json.loads(row.data_json), where=where)


def edit_splits(store, specs: list[HarnessSpec]) -> dict[str, list[str]]:
    """Harness name -> the splits its accepted edit (the one that made this tree) was judged
    on: tasks there informed the harness, so figures measured on them are in-sample."""
    import json

    by_hash = {s.hash: s.name for s in specs}
    splits: dict[str, set[str]] = {}
    for edit in store.edits():
        if edit.accepted and edit.child_hash in by_hash:
            split = json.loads(edit.metrics_json or "{}").get("split")
            if split:
                splits.setdefault(by_hash[edit.child_hash], set()).add(split)
    return {name: sorted(found) for name, found in sorted(splits.items())}


def edit_reproductions(store, specs: list[HarnessSpec]) -> dict[str, dict]:
    """Harness name -> the reproduction summary of the accepted edit that made its tree
    (:mod:`harnessctl.evolve.reproduce`), for harnesses that have one."""
    import json

    from ..evolve.reproduce import read_reproduction

    by_hash = {s.hash: s.name for s in specs}
    found: dict[str, dict] = {}
    for edit in store.edits():
        if edit.accepted and edit.child_hash in by_hash:
            repro = read_reproduction(json.loads(edit.metrics_json or "{}"))
            if repro is not None:
                found[by_hash[edit.child_hash]] = repro.summary()
    return found
