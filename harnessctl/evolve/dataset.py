"""Edit records as harness-engineer training data (``harnessctl export-edits``).

Two record kinds, both JSON lines, both described by the pydantic models below (their JSON
Schema is written next to the data as ``schema.json``):

- SFT (``sft/{train,test}.jsonl``): chat ``messages`` (system = the editor's instructions,
  user = the direction brief, the harness files in scope and the failure digests,
  assistant = the validated patch) for edits whose realised same-batch reward is at least
  ``min_reward`` and that were accepted.
- GRPO prompts (``grpo/{train,test}.jsonl``): the same prompt for EVERY edit context, with
  the reward recipe and the realised reference response and reward. The recipe executes:
  ``harnessctl.evolve.reward.reward_for_record(record, completion, workspace=...)`` builds
  the completion's child of the recorded parent, re-runs it on the recipe's batch and
  control (task, seed) pairs with the recorded policy and limits, and returns the verdict
  (reward = (rescues - regressions) / (batch + control); an invalid patch earns
  ``invalid_reward``). On the reference response it reproduces ``reference_reward`` when
  the recipe kept every pair of the judgement (``dropped_pairs`` is 0).

Split by task, so no task and no failure batch is on both sides: every task goes to test
with probability ``test_fraction`` (sha256 of seed and task id); an edit goes to the side
holding most of its batch's tasks (ties: train) and keeps only the digests, batch pairs and
control pairs of that side's tasks.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .directions import Direction
from .editors import SYSTEM, render_parts
from .reward import RewardRecipe

SCHEMA_VERSION = 2  # 2: the reward recipe names its function and holds every input


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str
    content: str


class EditMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")
    edit_id: str
    evolve_id: str
    parent_hash: str
    child_hash: str | None
    direction: str
    editor: str
    accepted: bool
    reward: float
    rescues: int
    regressions: int
    p_value: float | None
    suite: str
    source_split: str
    policy_id: str
    dataset_split: str
    tasks: list[str]


class SFTRecord(BaseModel):
    """One supervised example: prompt messages and the accepted patch."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = SCHEMA_VERSION
    messages: list[Message]
    metadata: EditMeta


class GRPORecord(BaseModel):
    """One RL prompt: the editor prompt, how to score a response, a realised reference."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = SCHEMA_VERSION
    prompt: list[Message]
    reward: RewardRecipe
    reference_response: str
    reference_reward: float
    metadata: EditMeta


def task_side(task_id: str, seed: int, test_fraction: float) -> str:
    h = int(hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "test" if h < test_fraction else "train"


def recipe_of(edit, metrics: dict, keep: set[str]) -> RewardRecipe:
    """The edit's reward recipe restricted to the pairs of the tasks in ``keep``."""
    recorded = metrics.get("reward") or {
        "parent_hash": edit.parent_hash,
        "suite": metrics["suite"],
        "split": metrics["split"],
        "policy_id": metrics["policy_id"],
        "batch": metrics["batch"],
        "control": metrics["control"],
        "accept_rule": metrics.get("rule", {}),
    }
    recipe = RewardRecipe.model_validate(recorded)
    batch = [(t, s) for t, s in recipe.batch if t in keep]
    control = [(t, s) for t, s in recipe.control if t in keep]
    dropped = len(recipe.batch) + len(recipe.control) - len(batch) - len(control)
    return recipe.model_copy(update={"batch": batch, "control": control, "dropped_pairs": dropped})


def export_edits(
    edits: list, out: Path, *, test_fraction: float = 0.2, seed: int = 0, min_reward: float = 1e-9
) -> dict:
    """Write the dataset; returns counts per file."""
    rows: dict[str, list[str]] = {
        f"{k}/{s}": [] for k in ("sft", "grpo") for s in ("train", "test")
    }
    for edit in edits:
        metrics = json.loads(edit.metrics_json or "{}")
        if "digests" not in metrics or edit.status == "rejected":
            continue  # nothing realised to learn from (rejected patches stay in the store)
        tasks = [t for t, _ in metrics["batch"]]
        sides = [task_side(t, seed, test_fraction) for t in tasks]
        side = "test" if sides.count("test") > sides.count("train") else "train"
        keep = {
            t
            for t in set(tasks) | {t for t, _ in metrics["control"]}
            if task_side(t, seed, test_fraction) == side
        }
        digests = [d["text"] for d in metrics["digests"] if d["task_id"] in keep]
        if not digests:
            continue
        direction = Direction.model_validate(metrics["direction"])
        prompt = [
            Message(role="system", content=SYSTEM),
            Message(role="user", content=render_parts(direction, metrics["files"], digests)),
        ]
        meta = EditMeta(
            edit_id=edit.id,
            evolve_id=edit.evolve_id,
            parent_hash=edit.parent_hash,
            child_hash=edit.child_hash,
            direction=edit.direction,
            editor=edit.editor,
            accepted=edit.accepted,
            reward=edit.reward,
            rescues=edit.rescues,
            regressions=edit.regressions,
            p_value=edit.p_value,
            suite=metrics["suite"],
            source_split=metrics["split"],
            policy_id=metrics["policy_id"],
            dataset_split=side,
            tasks=sorted(keep),
        )
        response = edit.patch or edit.response
        grpo = GRPORecord(
            prompt=prompt,
            reward=recipe_of(edit, metrics, keep),
            reference_response=response,
            reference_reward=edit.reward,
            metadata=meta,
        )
        rows[f"grpo/{side}"].append(grpo.model_dump_json())
        if edit.accepted and edit.reward >= min_reward:
            sft = SFTRecord(
                messages=[*prompt, Message(role="assistant", content=response)], metadata=meta
            )
            rows[f"sft/{side}"].append(sft.model_dump_json())
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, lines in rows.items():
        path = out / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        counts[name] = len(lines)
    schema = {"sft": SFTRecord.model_json_schema(), "grpo": GRPORecord.model_json_schema()}
    (out / "schema.json").write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "test_fraction": test_fraction,
        "seed": seed,
        "min_reward": min_reward,
        "counts": counts,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return counts
