"""Reading an ``export-edits`` directory for training: every line validated against its record
model (a bad one is an error naming the file, the line and the field), each record's
environment known, the held-out environment refused."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError
from .records import DataRef

SFT_FILE = "sft_prompt_completion/train.jsonl"
GRPO_FILE = "grpo/train.jsonl"
CORPUS = "corpus.json"
"""A corpus builder's manifest next to the export (:mod:`.corpus`): environments, suites."""


@dataclass
class Loaded:
    """The records of one stage and what became of the rest."""

    rows: list[dict[str, Any]]
    """Dataset rows: ``prompt`` and ``completion`` (SFT) or ``prompt`` and ``reward`` (GRPO),
    each with ``env``."""
    ref: DataRef
    left_out: Counter[str] = field(default_factory=Counter)


def export_manifest(data: Path) -> dict[str, Any]:
    path = Path(data) / "manifest.json"
    if not path.is_file():
        raise ConfigError(str(data), "not an export-edits directory (no manifest.json)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(str(path), f"unreadable: {exc}") from None


def corpus_manifest(data: Path) -> dict[str, Any] | None:
    path = Path(data) / CORPUS
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(str(path), f"unreadable: {exc}") from None


def record_env(record: Any) -> str | None:
    """The environment of an exported record: ``metadata.env`` (schema 6), else its
    parent harness's manifest in the reward recipe's tree."""
    meta = getattr(record, "metadata", None)
    if meta is not None and getattr(meta, "env", None):
        return meta.env
    recipe = getattr(record, "reward", None)
    tree = getattr(recipe, "parent_tree", None)
    if tree is None:
        return None
    import yaml

    for item in tree.files:
        if item.path == "harness.yaml" and item.encoding == "utf-8":
            data = yaml.safe_load(item.content) or {}
            return data.get("env") if isinstance(data, dict) else None
    return None


def read_records(path: Path, model: Any) -> list[Any]:
    """Every line of ``path`` as ``model``; ``ConfigError`` naming the line and the field."""
    from ..harness import format_validation_error

    records = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                records.append(model.model_validate_json(line))
            except ValidationError as exc:
                raise format_validation_error(f"{path}:{number}", exc) from None
    return records


def load_stage(data: Path, stage: str, holdout_env: str | None = None) -> Loaded:
    """The training records of ``stage`` in ``data``. ``holdout_env`` (or the corpus's own)
    must not occur among them: a record of it is a ``ConfigError``, not a silent drop, since
    a corpus that leaks its held-out environment is a broken experiment."""
    from ..evolve.dataset import GRPORecord, SFTPromptCompletionRecord

    manifest = export_manifest(data)
    corpus = corpus_manifest(data) or {}
    held = holdout_env or corpus.get("holdout_env") or manifest.get("holdout_env")
    rel = SFT_FILE if stage == "sft" else GRPO_FILE
    path = Path(data) / rel
    if not path.is_file():
        why = manifest.get("not_written", {}).get(rel.removesuffix(".jsonl"), "")
        raise ConfigError(str(path), f"no training records for --stage {stage}: {why}".rstrip())
    model = SFTPromptCompletionRecord if stage == "sft" else GRPORecord
    rows, envs = [], Counter[str]()
    for number, record in enumerate(read_records(path, model), 1):
        env = record_env(record)
        if held and env == held:
            raise ConfigError(
                f"{path}:{number}", f"a record of the held-out environment {held!r}"
            )  # fmt: skip
        envs[env or "unknown"] += 1
        prompt = [m.model_dump() for m in record.prompt]
        if stage == "sft":
            completion = [m.model_dump() for m in record.completion]
            rows.append({"prompt": prompt, "completion": completion, "env": env or ""})
        else:
            recipe = record.reward.model_dump(mode="json")
            rows.append({"prompt": prompt, "reward": recipe, "env": env or ""})
    if not rows:
        raise ConfigError(str(path), "holds no record")
    ref = DataRef(
        path=str(Path(data).resolve()),
        files={rel: _sha256(path)},
        records=len(rows),
        environments=dict(envs),
        holdout_env=held,
        max_digests=manifest.get("max_digests"),
    )
    return Loaded(rows, ref)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
