"""Edit records as harness-engineer training data (``harnessctl export-edits``).

Three record kinds, JSON lines, each described by a pydantic model below (their JSON Schema
is written next to the data as ``schema.json``):

- ``sft/{train,test}.jsonl``: chat ``messages``, the conversation the editor had, ending in
  an accepted patch whose judged reward is at least ``min_reward``: system = the editor's
  instructions, user = the direction brief, the harness files in scope and the failure
  digests; then, when the patch came after rejected ones, each rejected patch (assistant)
  and the rejection fed back (user); last the accepted patch. Every message has a
  ``weight``: 1 on the accepted patch only, so a trainer that honours it (or uses the
  prompt/completion files) never learns a rejected patch.
- ``sft_prompt_completion/{train,test}.jsonl``: the same examples in TRL's conversational
  prompt-completion form (``prompt`` = every message before the accepted patch,
  ``completion`` = it), so the loss is on the accepted patch alone.
- ``grpo/{train,test}.jsonl``: one RL prompt per editor attempt, rejected ones included
  (an attempt after a rejection has the earlier turns in its prompt), with the reward
  recipe, the realised reference response and its reward. The recipe is self-contained
  (the parent harness's files, the direction's full spec, the policy's model and
  parameters without credentials, the (task, seed) pairs) and executes:
  :func:`harnessctl.evolve.engineer.score_patch` or
  :func:`harnessctl.evolve.reward.reward_for_record` rebuild the parent, build the
  completion's child and re-run it on the recipe's pairs. ``reference_reward`` is what the
  recipe gives the reference response (computed from the judgement's per-pair outcomes on
  the pairs the record keeps, so nothing re-runs; for a rejected attempt the recipe's
  ``invalid_reward``); ``metadata.judged_reward`` is the reward the evolve judgement stored,
  over all its pairs.

Split by task, so no task and no failure batch is on both sides: every task goes to test
with probability ``test_fraction`` (sha256 of seed and task id); an edit goes to the side
holding most of its batch's tasks (ties: train) and keeps only the digests, batch pairs and
control pairs of that side's tasks. A file that would hold no record is not written (the
``datasets`` library refuses an empty JSON file): ``manifest.json`` lists it under
``not_written`` with the reason, and the dataset card (``README.md``) lists only the files
written, so ``datasets.load_dataset(out, "grpo")`` loads the splits there are.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from ..errors import HarnessctlError
from ..gateway.protocol import REDACTED, is_secret, redact
from .directions import Direction
from .editors import SYSTEM, render_parts, retry_turn
from .reward import HarnessTree, RewardRecipe, find_harness, judge, recipe_verdict

SCHEMA_VERSION = 6
# 2: the reward recipe names its function and holds every input
# 3: rejected attempts and retry turns; self-contained recipes (parent tree, pairs as
#    objects, no credentials); reference_reward from the record's own recipe (the stored one
#    is metadata.judged_reward); SFT also as prompt/completion; no empty file
# 4: the version field is named ``version``, as in every harnessctl record (was schema_version)
# 5: metadata.reproduction: an accepted edit's claimed rescues re-tested
# 6: metadata.env (the parent harness's environment); exports split by environment
#    (--holdout-env) and prompts with at most --max-digests failure digests
KINDS = ("sft", "sft_prompt_completion", "grpo")


def _version_of(data: dict[str, Any]) -> Any:
    """A stored record's version, under its name before schema 4 too."""
    return data.get("version", data.get("schema_version", SCHEMA_VERSION))


class _Versioned(BaseModel):
    """An exported record: ``version`` first; records written before schema 4 named it
    ``schema_version`` and still load."""

    model_config = ConfigDict(extra="forbid")
    version: int = SCHEMA_VERSION

    @model_validator(mode="before")
    @classmethod
    def _renamed_version(cls, data: Any) -> Any:
        if isinstance(data, dict) and "schema_version" in data:
            old = data["schema_version"]
            data = {k: v for k, v in data.items() if k != "schema_version"}
            data.setdefault("version", old)
        return data


SIDES = ("train", "test")


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str
    content: str


class Turn(Message):
    """A message of an SFT conversation."""

    weight: int
    """1: the accepted patch, the one message to learn; 0: everything else (the prompt, a
    rejected patch, the rejection fed back)."""


class EditMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")
    edit_id: str
    evolve_id: str
    parent_hash: str
    parent_name: str
    child_hash: str | None
    direction: str
    editor: str
    round: int
    attempt: int
    """0 for the first proposal of a round; n after n rejected ones (``retry_turns``)."""
    status: str
    """``rejected`` (the patch failed validation: ``reason``, ``detail``), ``evaluated``
    (judged, not accepted) or ``accepted``."""
    accepted: bool
    reason: str | None
    """The rejection's code (``no_blocks``, ``does_not_apply``, ``smoke_failed``...) or the
    judgement's verdict in words."""
    detail: str | None
    retry_turns: int
    """Rejected attempts of the same round shown in the prompt before this one."""
    judged_reward: float
    """The reward the evolve judgement stored, over all its pairs (``judged_pairs``, both
    sides of the split); ``reference_reward`` is over the record's own pairs."""
    judged_rescues: int
    judged_regressions: int
    judged_pairs: int | None
    """None in records of schema 2."""
    p_value: float | None
    suite: str
    source_split: str
    policy_id: str
    dataset_split: str
    tasks: list[str]
    env: str | None = None
    """The environment kind of the parent harness (its manifest's ``env``); None before
    schema 6, or when the parent was not found."""
    reproduction: dict[str, Any] | None = None
    """An accepted edit's claimed rescues re-tested where its parent fails afresh (fresh seeds,
    held-out tasks of the same categories): ``claimed``, ``tested``, ``reproduced``,
    ``fraction`` (None: nothing re-testable), ``fresh_seeds`` and ``held_out`` as
    [reproduced, tested] (:mod:`harnessctl.evolve.reproduce`); None before schema 5, and for
    edits not accepted."""

    @model_validator(mode="before")
    @classmethod
    def _from_schema_2(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "judged_reward" in data or "reward" not in data:
            return data
        old = dict(data)
        for name in ("reward", "rescues", "regressions"):
            old[f"judged_{name}"] = old.pop(name)
        defaults = {"parent_name": "", "round": 0, "attempt": 0, "reason": None, "detail": None}
        defaults |= {"retry_turns": 0, "judged_pairs": None}
        defaults["status"] = "accepted" if old.get("accepted") else "evaluated"
        return defaults | old


class SFTRecord(_Versioned):
    """One supervised example: the editor's conversation, ending in the accepted patch."""

    messages: list[Turn]
    metadata: EditMeta

    @model_validator(mode="before")
    @classmethod
    def _from_schema_2(cls, data: Any) -> Any:
        if isinstance(data, dict) and _version_of(data) < 3:
            messages = [dict(m) for m in data.get("messages", [])]  # one turn, no weights
            for i, message in enumerate(messages):
                message.setdefault("weight", int(i == len(messages) - 1))
            data = {**data, "messages": messages}
        return data


class SFTPromptCompletionRecord(_Versioned):
    """The same example in TRL's conversational prompt-completion form."""

    prompt: list[Message]
    completion: list[Message]
    metadata: EditMeta


class GRPORecord(_Versioned):
    """One RL prompt: the editor prompt, how to score a response, a realised reference."""

    prompt: list[Message]
    reward: RewardRecipe
    reference_response: str
    reference_reward: float
    """What ``reward`` gives ``reference_response`` (its own pairs, its own formula)."""
    metadata: EditMeta


class EditExport(_Versioned):
    """What an export wrote (``manifest.json``)."""

    test_fraction: float
    seed: int
    min_reward: float
    counts: dict[str, int]
    """``<kind>/<side>`` -> records, for every kind and side (0: not written)."""
    files: dict[str, str]
    """``<kind>/<side>`` -> its file, relative to the export directory: the files written."""
    not_written: dict[str, str]
    """``<kind>/<side>`` -> why it has no record (no file is written for it)."""
    skipped: dict[str, int]
    """Edits left out, by reason: ``no_context`` (recorded before edits kept their prompt),
    ``reference_reward_unknown`` (the per-pair outcomes the record's reward needs are not in
    the store)."""
    without_parent_tree: int = 0
    """GRPO records whose parent harness was not found (they need a workspace to score)."""
    holdout_env: str | None = None
    """Split by environment instead of by task: every record of this environment on the test
    side, every other on train (``--holdout-env``)."""
    max_digests: int | None = None
    """Failure digests shown per prompt at most (None: every one of the record's side)."""
    environments: dict[str, int] = {}
    """GRPO records per environment (``unknown``: the parent was not found)."""


def task_side(task_id: str, seed: int, test_fraction: float) -> str:
    h = int(hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "test" if h < test_fraction else "train"


def full_recipe(edit: Any, metrics: dict) -> RewardRecipe:
    """The recipe of the edit's whole judgement (records of schema 1 had none: rebuilt)."""
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
    params = recipe.policy_params
    return recipe.model_copy(
        update={
            "parent_name": recipe.parent_name or edit.parent_name,
            "direction": recipe.direction or metrics.get("direction"),
            "policy_params": None if params is None else public_params(params),
        }
    )


def public_params(params: dict) -> dict:
    """Policy parameters as an export holds them: credentials dropped, not just masked."""
    return {k: v for k, v in redact(params).items() if not is_secret(k, v) and v != REDACTED}


def kept_recipe(recipe: RewardRecipe, keep: set[str]) -> RewardRecipe:
    """``recipe`` restricted to the pairs of the tasks in ``keep``."""
    batch = [p for p in recipe.batch if p[0] in keep]
    control = [p for p in recipe.control if p[0] in keep]
    dropped = recipe.dropped_pairs + len(recipe.batch) + len(recipe.control)
    dropped -= len(batch) + len(control)
    return recipe.model_copy(update={"batch": batch, "control": control, "dropped_pairs": dropped})


def reference_reward(
    edit: Any, metrics: dict, full: RewardRecipe, kept: RewardRecipe, store: Any = None
) -> float | None:
    """What ``kept`` gives the edit's own patch, from the judgement's outcomes (None: they
    cannot be told apart from what was recorded)."""
    if edit.status == "rejected":
        return kept.invalid_reward
    if full.gate is not None:  # fresh pairs: parent and child at the recipe's seeds
        tasks = {t for t, _ in kept.batch + kept.control}
        seeds = set(kept.seeds or [])
        judged = [p for p in metrics.get("pairs", []) if p.get("parent_success") is not None]
        if not judged:  # recorded without its pairs: the store's rollouts give them
            judged = stored_fresh_pairs(edit, full, store)
        mine = [p for p in judged if p["task_id"] in tasks and int(p["seed"]) in seeds]
        if not mine:
            return None
        wins = sum(1 for p in mine if p["success"] and not p["parent_success"])
        losses = sum(1 for p in mine if p["parent_success"] and not p["success"])
        return (wins - losses) / len(mine)
    if metrics.get("pairs"):  # per-pair results, where the engine recorded them
        success = {(p["task_id"], int(p["seed"])): bool(p["success"]) for p in metrics["pairs"]}
        return recipe_verdict(kept, success).reward
    rescues: int | None = None
    if "rescued" in metrics:
        rescued = {(t, int(s)) for t, s in metrics["rescued"]}
        rescues = sum(1 for p in kept.batch if p in rescued)
    elif len(kept.batch) == len(full.batch) or edit.rescues == 0:
        rescues = edit.rescues
    regressions: int | None = None
    if len(kept.control) == len(full.control) or edit.regressions == 0:
        regressions = edit.regressions
    if rescues is not None and regressions is not None:
        return judge(rescues, regressions, len(kept.batch), len(kept.control)).reward
    stored = stored_outcomes(edit, full, store)
    return None if stored is None else recipe_verdict(kept, stored).reward


def stored_fresh_pairs(edit: Any, full: RewardRecipe, store: Any) -> list[dict]:
    """Parent's and child's results on a fresh-paired recipe's pairs, from their rollouts in
    ``store`` (none: no store, a pair missing on either side, or rollouts that disagree)."""
    if store is None or not edit.child_hash or not full.seeds:
        return []
    wanted = {(t, s) for t, _ in full.batch + full.control for s in full.seeds}

    def results(harness_hash: str) -> dict | None:
        seen: dict[tuple, set[bool]] = defaultdict(set)
        for row in store.rollouts(harness_hash=harness_hash, policy_id=full.policy_id):
            if (row.task_id, row.seed) in wanted:
                seen[row.task_id, row.seed].add(bool(row.success))
        if set(seen) != wanted or any(len(v) > 1 for v in seen.values()):
            return None
        return {pair: values.pop() for pair, values in seen.items()}

    child, parent = results(edit.child_hash), results(full.parent_hash)
    if child is None or parent is None:
        return []
    return [
        {"task_id": t, "seed": s, "success": child[t, s], "parent_success": parent[t, s]}
        for t, s in sorted(wanted)
    ]


def stored_outcomes(edit: Any, full: RewardRecipe, store: Any) -> dict | None:
    """The child's success per pair of the judgement, from its rollouts in ``store``: None
    when there is no store, a pair has rollouts that disagree (several runtime versions), or
    the outcomes do not give the judgement's counts back."""
    if store is None or not edit.child_hash:
        return None
    pairs = set(full.batch) | set(full.control)
    seen: dict[tuple, set[bool]] = defaultdict(set)
    for row in store.rollouts(harness_hash=edit.child_hash, policy_id=full.policy_id):
        if (row.task_id, row.seed) in pairs:
            seen[row.task_id, row.seed].add(bool(row.success))
    if any(len(values) > 1 for values in seen.values()):
        return None
    success = {pair: values.pop() for pair, values in seen.items()}
    verdict = recipe_verdict(full, success)
    if (verdict.rescues, verdict.regressions) != (edit.rescues, edit.regressions):
        return None
    return success


def export_edits(
    edits: list,
    out: Path,
    *,
    test_fraction: float = 0.2,
    seed: int = 0,
    min_reward: float = 1e-9,
    store: Any = None,
    workspace: Any = None,
    holdout_env: str | None = None,
    max_digests: int | None = None,
) -> EditExport:
    """Write the dataset to ``out``; returns what was written (also ``manifest.json``).

    ``store`` (where the edits came from) gives per-pair outcomes when a record's reward
    needs them; ``workspace`` (a ``Workspace`` or its directory) gives each parent harness's
    files (without one, or when the parent is gone, a record holds its parent's hash only
    and is counted in ``without_parent_tree``).

    ``holdout_env`` splits by environment instead of by task: every record of that
    environment goes to test with all its tasks, every other to train, so a model trained on
    the train side never saw the environment (an edit whose environment is unknown is left
    out: ``env_unknown``). ``max_digests`` keeps at most that many failure digests in each
    prompt (shorter prompts for small machines; the reward's pairs are unchanged)."""
    if workspace is not None and not hasattr(workspace, "harness_dirs"):
        from ..workspace import load_workspace

        workspace = load_workspace(Path(workspace))
    rows: dict[str, list[str]] = {f"{k}/{s}": [] for k in KINDS for s in SIDES}
    rounds: dict[tuple, list] = defaultdict(list)
    for edit in edits:
        rounds[edit.evolve_id, edit.parent_hash, edit.direction, edit.round].append(edit)
    trees: dict[str, HarnessTree | None] = {}
    envs: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    without_tree = 0
    for edit in edits:
        metrics = json.loads(edit.metrics_json or "{}")
        if "digests" not in metrics:
            skipped["no_context"] += 1  # recorded before edits kept what the editor saw
            continue
        if edit.parent_hash not in trees:
            trees[edit.parent_hash] = _tree(workspace, edit.parent_hash, edit.parent_name)
        env = _env(trees[edit.parent_hash], workspace, edit.parent_name)
        tasks = [t for t, _ in metrics["batch"]]
        every = set(tasks) | {t for t, _ in metrics["control"]}
        if holdout_env is not None:  # by environment: all its tasks on one side
            if env is None:
                skipped["env_unknown"] += 1
                continue
            side = "test" if env == holdout_env else "train"
            keep = every
        else:
            sides = [task_side(t, seed, test_fraction) for t in tasks]
            side = "test" if sides.count("test") > sides.count("train") else "train"
            keep = {t for t in every if task_side(t, seed, test_fraction) == side}
        full = full_recipe(edit, metrics)
        kept = kept_recipe(full, keep)
        reference = reference_reward(edit, metrics, full, kept, store)
        if reference is None:
            skipped["reference_reward_unknown"] += 1
            continue
        kept = kept.model_copy(update={"parent_tree": trees[edit.parent_hash]})
        without_tree += kept.parent_tree is None
        digests = [d["text"] for d in metrics["digests"] if d["task_id"] in keep]
        if max_digests is not None:
            digests = digests[:max_digests]
        direction = Direction.model_validate(metrics["direction"])
        prompt = [
            Message(role="system", content=SYSTEM),
            Message(role="user", content=render_parts(direction, metrics["files"], digests)),
        ]
        earlier = sorted(
            (
                e
                for e in rounds[edit.evolve_id, edit.parent_hash, edit.direction, edit.round]
                if e.attempt < edit.attempt and e.status == "rejected"
            ),
            key=lambda e: e.attempt,
        )
        for rejected in earlier:
            prompt.append(Message(role="assistant", content=rejected.response))
            prompt.append(Message(**retry_turn(f"{rejected.reason}: {rejected.detail}")))
        meta = _meta(edit, metrics, full, side, keep, len(earlier), env)
        response = edit.patch or edit.response
        grpo = GRPORecord(
            prompt=prompt,
            reward=kept,
            reference_response=response,
            reference_reward=reference,
            metadata=meta,
        )
        rows[f"grpo/{side}"].append(grpo.model_dump_json())
        envs[env or "unknown"] += 1
        if edit.accepted and edit.reward >= min_reward:
            answer = Message(role="assistant", content=response)
            turns = [Turn(**m.model_dump(), weight=0) for m in prompt]
            sft = SFTRecord(messages=[*turns, Turn(**answer.model_dump(), weight=1)], metadata=meta)
            rows[f"sft/{side}"].append(sft.model_dump_json())
            pc = SFTPromptCompletionRecord(prompt=prompt, completion=[answer], metadata=meta)
            rows[f"sft_prompt_completion/{side}"].append(pc.model_dump_json())
    split = {"holdout_env": holdout_env, "max_digests": max_digests, "environments": dict(envs)}
    return _write(out, rows, test_fraction, seed, min_reward, dict(skipped), without_tree, split)


def _tree(workspace: Any, parent_hash: str, name: str) -> HarnessTree | None:
    if workspace is None:
        return None
    try:
        return HarnessTree.of(find_harness(workspace, parent_hash, name))
    except HarnessctlError:  # the parent is gone from the workspace: the record keeps its hash
        return None


def _env(tree: HarnessTree | None, workspace: Any, name: str) -> str | None:
    """The environment of an edit's parent: its tree's manifest, else the workspace's harness
    of that name (the environment a harness name runs in does not change with its edits)."""
    import yaml

    for item in tree.files if tree is not None else []:
        if item.path == "harness.yaml" and item.encoding == "utf-8":
            data = yaml.safe_load(item.content)
            return data.get("env") if isinstance(data, dict) else None
    if workspace is None:
        return None
    try:
        return workspace.load_harness(name).manifest.env
    except HarnessctlError:
        return None


def _meta(edit, metrics: dict, full: RewardRecipe, side: str, keep: set, retries: int, env):
    return EditMeta(
        edit_id=edit.id,
        evolve_id=edit.evolve_id,
        parent_hash=edit.parent_hash,
        parent_name=edit.parent_name,
        child_hash=edit.child_hash,
        direction=edit.direction,
        editor=edit.editor,
        round=edit.round,
        attempt=edit.attempt,
        status=edit.status,
        accepted=edit.accepted,
        reason=edit.reason,
        detail=edit.detail,
        retry_turns=retries,
        judged_reward=edit.reward,
        judged_rescues=edit.rescues,
        judged_regressions=edit.regressions,
        judged_pairs=len(full.batch) + len(full.control),
        p_value=edit.p_value,
        suite=metrics["suite"],
        source_split=metrics["split"],
        policy_id=metrics["policy_id"],
        dataset_split=side,
        tasks=sorted(keep),
        reproduction=_reproduction(metrics),
        env=env,
    )


def _reproduction(metrics: dict) -> dict[str, Any] | None:
    from .reproduce import read_reproduction

    found = read_reproduction(metrics)
    return None if found is None else found.summary()


def _why_empty(
    name: str, rows: dict[str, list[str]], test_fraction: float, holdout: str | None = None
) -> str:
    kind, side = name.split("/")
    if not any(rows[f"grpo/{s}"] for s in SIDES):
        return "no edit record with the editor's context to export"
    if not rows[f"grpo/{side}"] and holdout is not None:
        if side == "test":
            return f"no edit record of the held-out environment {holdout!r}"
        return f"every edit record is of the held-out environment {holdout!r}"
    if not rows[f"grpo/{side}"]:
        if side == "test" and test_fraction == 0:
            return "--test-fraction is 0: every task is on the train side"
        other = "raise" if side == "test" else "lower"
        return (
            f"no edit's failure batch fell on the {side} side of the task split ({other} "
            "--test-fraction, or export more edits)"
        )
    return f"no accepted edit on the {side} side has at least --min-reward"


def _write(
    out: Path, rows, test_fraction, seed, min_reward, skipped, without_tree, split: dict
) -> EditExport:
    out.mkdir(parents=True, exist_ok=True)
    files, not_written = {}, {}
    for name, lines in rows.items():
        path = out / f"{name}.jsonl"
        if lines:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            files[name] = f"{name}.jsonl"
        else:
            path.unlink(missing_ok=True)  # an earlier export's file is not this one's
            not_written[name] = _why_empty(name, rows, test_fraction, split["holdout_env"])
    schema = {
        "sft": SFTRecord.model_json_schema(),
        "sft_prompt_completion": SFTPromptCompletionRecord.model_json_schema(),
        "grpo": GRPORecord.model_json_schema(),
    }
    (out / "schema.json").write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    export = EditExport(
        test_fraction=test_fraction,
        seed=seed,
        min_reward=min_reward,
        counts={name: len(lines) for name, lines in rows.items()},
        files=files,
        not_written=not_written,
        skipped=skipped,
        without_parent_tree=without_tree,
        **split,
    )
    (out / "manifest.json").write_text(export.model_dump_json(indent=2) + "\n")
    (out / "README.md").write_text(_card(files), encoding="utf-8")
    return export


def _card(files: dict[str, str]) -> str:
    """A dataset card whose ``configs`` name the files written, one config per kind."""
    lines = ["---", "configs:"]
    for kind in KINDS:
        written = [(s, files[f"{kind}/{s}"]) for s in SIDES if f"{kind}/{s}" in files]
        if written:
            lines += [f"- config_name: {kind}", "  data_files:"]
            lines += [f"  - split: {s}\n    path: {p}" for s, p in written]
    if lines[-1] == "configs:":
        lines[-1] = "configs: []"
    lines += [
        "---",
        "# Harness-engineer edit records",
        "",
        "Written by `harnessctl export-edits`. `sft`: chat messages; `sft_prompt_completion`:",
        "the same examples as prompt/completion; `grpo`: prompts with an executable reward",
        "recipe. `manifest.json` says which files were not written and why; `schema.json`",
        "describes every record.",
        "",
    ]
    return "\n".join(lines)
