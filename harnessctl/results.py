"""The typed, versioned results of the commands whose output is a few facts (``init``,
``export-edits``, ``export-pool``, ``pool verify``, ``profile``, ``route``): what their
``--json`` prints. Every one is a :class:`harnessctl.records.Result`: ``kind``, ``version``,
then the payload."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .profiles.evidence import ProfileEvidence
from .records import Result


class InitResult(Result):
    kind: Literal["init"] = "init"
    version: int = 1
    root: str
    harnesses: list[str] = Field(default_factory=list)
    """The harnesses the workspace holds."""


class ExportEditsResult(Result):
    kind: Literal["export-edits"] = "export-edits"
    version: int = 1
    out: str
    counts: dict[str, int]
    """``sft/train``, ``sft/test``, ``sft_prompt_completion/train``,
    ``sft_prompt_completion/test``, ``grpo/train``, ``grpo/test`` -> records written."""
    empty: list[str] = Field(default_factory=list)
    """Files not written because no record fell on that side (``manifest.json`` says why;
    each is warned about on stderr)."""


class ExportPoolResult(Result):
    kind: Literal["export-pool"] = "export-pool"
    version: int = 2
    pool_id: str
    path: str
    archive: str
    harnesses: list[str]
    profile_splits: dict[str, str] = Field(default_factory=dict)
    """Harness name -> the split of the profile frozen for it."""
    left_out: dict[str, str] = Field(default_factory=dict)
    """Siblings left out, each with the reason (claimed rescues that do not reproduce)."""


class VerifyResult(Result):
    kind: Literal["pool-verify"] = "pool-verify"
    version: int = 1
    path: str
    ok: bool
    problems: list[str] = Field(default_factory=list)
    pool_id: str | None = None
    harnesses: int = 0


class ProfilesResult(Result):
    """``profile --json``: the profiles of a pool, keyed by harness, with the rescue matrix."""

    kind: Literal["profile"] = "profile"
    version: int = 1
    base: str
    policy: str
    profiles: dict[str, dict[str, Any]]
    """Harness -> its profile as stored (``harnessctl.records.Profile.dump``)."""
    profile_ids: dict[str, str] = Field(default_factory=dict)
    matrix: dict[str, Any]
    """The rescue matrix (``harnessctl.records.RescueMatrix``)."""
    paths: list[str] = Field(default_factory=list)
    reanchor: dict[str, Any] | None = None
    """With ``--policy`` under a new policy: the anchor, the sample and each harness's drift."""


class RouteRecord(Result):
    """``route --json``: the ranked pool for one failed task, with each voter's answer."""

    kind: Literal["route"] = "route"
    version: int = 3
    task_id: str
    category: str
    failure_outcomes: list[str]
    k: int
    top: list[dict[str, Any]]
    ranked: list[dict[str, Any]]
    voters: list[dict[str, Any]] = Field(default_factory=list)
    profile_splits: dict[str, str] = Field(default_factory=dict)
    """Candidate name -> the split of the profile it was ranked by."""
    in_sample: bool = False
    """The task was in the profiles' evidence: the ranking saw it."""
    evidence: ProfileEvidence | None = None
    """Which profiles ranked the candidates: their split (named by ``--split`` or chosen by
    the default ``eval --router`` shares), the harnesses read and those left out (version
    3)."""
