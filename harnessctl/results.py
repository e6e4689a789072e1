"""The typed, versioned results of the commands whose output is a few facts (``init``,
``export-edits``, ``export-pool``, ``pool verify``): what their ``--json`` prints."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InitResult(_Model):
    kind: Literal["init"] = "init"
    version: int = 1
    root: str
    harnesses: list[str] = Field(default_factory=list)
    """The harnesses the workspace holds."""


class ExportEditsResult(_Model):
    kind: Literal["export-edits"] = "export-edits"
    version: int = 1
    out: str
    counts: dict[str, int]
    """``sft/train``, ``sft/test``, ``sft_prompt_completion/train``,
    ``sft_prompt_completion/test``, ``grpo/train``, ``grpo/test`` -> records written."""
    empty: list[str] = Field(default_factory=list)
    """Files not written because no record fell on that side (``manifest.json`` says why;
    each is warned about on stderr)."""


class ExportPoolResult(_Model):
    kind: Literal["export-pool"] = "export-pool"
    version: int = 1
    pool_id: str
    path: str
    archive: str
    harnesses: list[str]


class VerifyResult(_Model):
    kind: Literal["pool-verify"] = "pool-verify"
    version: int = 1
    path: str
    ok: bool
    problems: list[str] = Field(default_factory=list)
    pool_id: str | None = None
    harnesses: int = 0
