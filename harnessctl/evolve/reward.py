"""The edit reward, as a library function: build the child, re-run it paired on the same
batch, judge it.

The child is re-run on exactly the (task, seed) pairs of the parent's failure batch
(rescues) and of a sample of the parent's successes (regressions). Pairs make the
comparison paired: with b rescues and c regressions, the exact one-sided sign test (McNemar)
asks how likely b or more of the b+c discordant pairs favour the child if the edit did
nothing: p = P(X >= b), X ~ Binomial(b + c, 1/2). An edit is accepted when
``b - c >= min_net`` and ``p <= alpha`` (flags ``--min-net`` and ``--alpha``). The reward
is (b - c) / (batch + control); a patch that fails validation (it does not parse or apply,
leaves the direction's files, does not compile, or the child fails a smoke task) earns
``INVALID_REWARD``.

:func:`judge_edit` does all of that and nothing else: no git commit, no edit record. The
evolve engine calls it per proposal and then writes the store and git itself; a trainer
calls it (or :func:`reward_for_record` on an exported GRPO record) to score a completion::

    from harnessctl.evolve.reward import reward_for_record
    verdict = reward_for_record(grpo_line, completion_text, workspace="path/to/workspace")
    verdict.reward

A GRPO record (schema 3) carries its parent harness's files (:class:`HarnessTree`), so
``reward_for_record(record, completion, suite="path/to/suite")`` needs no workspace at all;
:mod:`harnessctl.evolve.engineer` wraps it as a cached, parallel, time-bounded reward.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from math import comb
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, field_validator

from ..errors import HarnessctlError
from .directions import Direction
from .gate import GatePlan, Look, run_gate
from .validate import Rejected, build_child

if TYPE_CHECKING:
    from ..harness import HarnessSpec
    from ..policy import Policy
    from ..run.evaluate import EvalRequest
    from ..run.executor import Progress

INVALID_REWARD = 0.0
REWARD_FUNCTION = "harnessctl.evolve.reward.reward_for_record"
Pair = tuple[str, int]


@dataclass(frozen=True)
class Verdict:
    rescues: int
    regressions: int
    batch: int
    control: int
    p_value: float
    reward: float
    accepted: bool
    reason: str


def sign_test(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    return sum(comb(n, i) for i in range(b, n + 1)) / 2**n


def judge(
    rescues: int,
    regressions: int,
    batch: int,
    control: int,
    *,
    alpha: float = 0.1,
    min_net: int = 1,
) -> Verdict:
    p = sign_test(rescues, regressions)
    net = rescues - regressions
    reward = net / max(1, batch + control)
    if net < min_net:
        reason = f"net {net:+d} below the minimum {min_net}"
        ok = False
    elif p > alpha:
        reason = f"p={p:.3f} above alpha {alpha}"
        ok = False
    else:
        reason = (
            f"batch rescues {rescues}/{batch}, control regressions {regressions}/{control}, "
            f"p={p:.3f}"
        )
        ok = True
    return Verdict(rescues, regressions, batch, control, p, reward, ok, reason)


class PairResult(BaseModel):
    """The child's rollout on one (task, seed) pair of the judgement."""

    model_config = ConfigDict(extra="forbid")
    task_id: str
    seed: int
    role: Literal["batch", "control"]
    """``batch``: the parent failed it (a success is a rescue); ``control``: the parent
    succeeded (a failure, or no result, is a regression)."""
    success: bool
    outcome: str | None
    """None when the child got no result (the rollout failed on infrastructure)."""
    rollout_id: str | None
    tokens: int = 0
    parent_success: bool | None = None
    """The parent's result on the same pair where the gate ran it too (sequential design);
    None under the same-batch design, where the role says it."""


class Confirmation(BaseModel):
    """Parent and child re-run on the judged tasks at fresh seeds, neither chosen by an
    outcome: under an edit that does nothing their results are exchangeable, so the sign
    test over the discordant pairs holds its level (the same-batch test alone does not for a
    sampled model: the batch was chosen because the parent failed, docs/decisions.md)."""

    model_config = ConfigDict(extra="forbid")
    seeds: list[int]
    pairs: int
    wins: int
    """Pairs the child solved and the parent did not."""
    losses: int
    """Pairs the parent solved and the child did not."""
    p_value: float
    accepted: bool
    reason: str


class EditVerdict(BaseModel):
    """What :func:`judge_edit` found: the child's reward and whether it is accepted."""

    model_config = ConfigDict(extra="forbid")
    status: Literal["rejected", "evaluated"]
    """``rejected``: the patch failed validation (``reason`` is the code); ``evaluated``:
    the child was re-run on the batch and control pairs."""
    accepted: bool
    reward: float
    reason: str
    detail: str | None = None
    rescues: int = 0
    regressions: int = 0
    batch_size: int
    control_size: int
    p_value: float | None = None
    child_hash: str | None = None
    patch: str = ""
    """The patch as normalised SEARCH/REPLACE blocks (empty when it did not parse/apply)."""
    diff: str = ""
    pairs: list[PairResult] = []
    eval_tokens: int = 0
    """Prompt plus completion tokens of the child's paired re-run."""
    confirmation: Confirmation | None = None
    """The confirmation on fresh seeds, when the same-batch test passed and one was asked
    for (``confirm_seeds`` > 0); ``accepted`` is then its verdict."""

    design: Literal["sequential", "same-batch"] = "same-batch"
    """How the child was judged (:mod:`.gate`): ``sequential`` (fresh seeds, parent and child
    both run, anytime-valid e-value test at ``level``) or ``same-batch`` (re-run on the
    parent's own failures and successes, sign test at ``alpha``)."""
    level: float | None = None
    """The sequential test's level (alpha shared out by the run's error control)."""
    looks: list[Look] = []
    """The sequential test after each look (one fresh seed of every judged task)."""

    @property
    def rescued(self) -> list[Pair]:
        """Pairs the child solved where the parent failed."""
        return [
            (p.task_id, p.seed)
            for p in self.pairs
            if p.success
            and (p.parent_success is False if p.parent_success is not None else p.role == "batch")
        ]


def child_manifest(parent: HarnessSpec, direction: Direction, name: str, **more: Any) -> dict:
    """The manifest fields a child of ``parent`` along ``direction`` gets."""
    return {
        "name": name,
        "parent": parent.name,
        "parent_hash": parent.hash,
        "direction": direction.name,
        **more,
    }


def judge_edit(
    parent: HarnessSpec,
    direction: Direction,
    patch: str,
    *,
    batch: Sequence[Pair],
    control: Sequence[Pair],
    evaluation: EvalRequest,
    store: Any,
    alpha: float = 0.1,
    min_net: int = 1,
    manifest_update: dict | None = None,
    workdir: Path | None = None,
    progress: Progress | None = None,
    confirm_seeds: int = 0,
    gate: GatePlan | None = None,
    level: float | None = None,
    fixed_seeds: Sequence[int] | None = None,
) -> EditVerdict:
    """Score ``patch`` (an editor's reply) as an edit of ``parent`` along ``direction``.

    Validates the patch and builds the child in ``workdir`` (kept, for a caller that commits
    it) or in a temporary directory (removed), smoke-tests it on the first batch pair, then
    re-runs it through :func:`harnessctl.run.evaluate` (cached, stored like any
    evaluation) on ``batch`` (pairs the parent failed) and ``control`` (pairs it succeeded
    on) with the suite, split, policy and limits of ``evaluation``. Writes no edit record and
    no git commit. With ``confirm_seeds`` > 0, an edit the same-batch test accepts is
    accepted only if a :class:`Confirmation` on that many fresh seeds accepts it too.

    With ``gate`` (a :class:`GatePlan`), the child is judged by the sequential design of
    :mod:`.gate` instead: the tasks of ``batch`` then ``control`` (their seeds are not
    reused), parent and child at fresh seeds one look at a time, accepted when the e-value
    reaches ``1 / level`` (``level`` defaults to ``alpha``). With ``fixed_seeds`` as well,
    one look at exactly those seeds of every task (no stopping: what a reward recipe replays).
    """
    if gate is not None and confirm_seeds:
        raise ValueError("confirm_seeds applies to the same-batch design only")
    if not batch:
        raise ValueError("judge_edit needs at least one batch pair")
    batch = [(str(t), int(s)) for t, s in batch]
    control = [(str(t), int(s)) for t, s in control]
    update = manifest_update or child_manifest(parent, direction, f"{parent.name}.candidate")
    scratch = None
    if workdir is None:
        scratch = Path(tempfile.mkdtemp(prefix="hxjudge-"))
        workdir = scratch / str(update["name"])
    patch_text = diff = ""
    try:
        try:
            child, patch_text, diff = build_child(parent, direction, patch, workdir, update)
            smoke = _run(evaluation, child, [batch[0]], store, progress)
            if not smoke or smoke[0].outcome in ("harness_error", "timeout"):
                outcome = smoke[0].outcome if smoke else "?"
                raise Rejected(
                    "smoke_failed", f"{outcome}: {smoke[0].error if smoke else 'no smoke result'}"
                )
        except Rejected as exc:
            return EditVerdict(
                status="rejected",
                accepted=False,
                reward=INVALID_REWARD,
                reason=exc.reason,
                detail=exc.detail,
                batch_size=len(batch),
                control_size=len(control),
                patch=patch_text,
                diff=diff,
            )
        if gate is not None:
            return _sequential(
                parent, child, batch, control, evaluation, store, progress, gate,
                level if level is not None else alpha, alpha, patch_text, diff, fixed_seeds,
            )  # fmt: skip
        rows = {
            (r.task_id, r.seed): r
            for r in _run(evaluation, child, batch + control, store, progress)
        }
        pairs = [_pair(rows.get(p), p, "batch") for p in batch]
        pairs += [_pair(rows.get(p), p, "control") for p in control]
        rescues = sum(1 for p in pairs if p.role == "batch" and p.success)
        regressions = sum(1 for p in pairs if p.role == "control" and not p.success)
        rule = judge(rescues, regressions, len(batch), len(control), alpha=alpha, min_net=min_net)
        accepted, reason, confirmation = rule.accepted, rule.reason, None
        if rule.accepted and confirm_seeds > 0:
            tasks = list(dict.fromkeys(t for t, _ in batch + control))
            confirmation = confirm(
                parent, child, tasks, evaluation, store, confirm_seeds, alpha, min_net, progress
            )
            accepted = confirmation.accepted
            reason = f"{rule.reason}; {confirmation.reason}"
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return EditVerdict(
        status="evaluated",
        accepted=accepted,
        reward=rule.reward,
        reason=reason,
        confirmation=confirmation,
        rescues=rescues,
        regressions=regressions,
        p_value=rule.p_value,
        child_hash=child.hash,
        patch=patch_text,
        diff=diff,
        pairs=pairs,
        eval_tokens=sum(r.prompt_tokens + r.completion_tokens for r in rows.values()),
        batch_size=len(batch),
        control_size=len(control),
    )


def _sequential(
    parent, child, batch, control, evaluation, store, progress, plan: GatePlan, level: float,
    alpha: float, patch_text: str, diff: str, fixed_seeds: Sequence[int] | None = None,
) -> EditVerdict:  # fmt: skip
    """:func:`judge_edit` under the sequential design (:func:`.gate.run_gate` with rollouts)."""
    batch_tasks = list(dict.fromkeys(t for t, _ in batch))
    control_tasks = [t for t in dict.fromkeys(t for t, _ in control) if t not in batch_tasks]
    tasks = batch_tasks + control_tasks
    parent_rows: dict = {}
    child_rows: dict = {}

    def observe(pairs):
        parent_rows.update(
            {(r.task_id, r.seed): r for r in _run(evaluation, parent, pairs, store, progress)}
        )
        child_rows.update(
            {(r.task_id, r.seed): r for r in _run(evaluation, child, pairs, store, progress)}
        )
        return (
            {p: bool(parent_rows.get(p) and parent_rows[p].success) for p in pairs},
            {p: bool(child_rows.get(p) and child_rows[p].success) for p in pairs},
        )  # fmt: skip

    if fixed_seeds:  # one look at exactly these seeds
        seeds = [int(s) for s in fixed_seeds]
        plan = replace(plan, max_looks=1, min_looks=1, look_pairs=len(tasks) * len(seeds))
    else:
        seeds = fresh_seeds(evaluation, plan.seeds_needed(len(tasks)))
    looks = run_gate(tasks, seeds, observe, level=level, alpha=alpha, plan=plan)
    last = looks[-1]
    used = seeds[: last.look * plan.seeds_per_look(len(tasks))]
    judged = [(t, s) for s in used for t in tasks]
    pairs = []
    for p in judged:
        before = parent_rows.get(p)
        result = _pair(child_rows.get(p), p, "batch" if p[0] in batch_tasks else "control")
        result.parent_success = bool(before is not None and before.success)
        pairs.append(result)
    net = last.wins - last.losses
    said = {
        "accept": "accepted",
        "worse": "stopped: the child is worse",
        "futile": "stopped: a win is out of reach",
        "exhausted": "not accepted after the last look",
    }[last.decision]
    reason = (
        f"{said} at look {last.look}: {last.wins} wins, {last.losses} losses over "
        f"{last.pairs} fresh pairs, e={last.e_value:.3g} (needs {1 / level:.4g})"
    )
    return EditVerdict(
        status="evaluated",
        accepted=last.decision == "accept",
        reward=net / max(1, last.pairs),
        reason=reason,
        rescues=last.wins,
        regressions=last.losses,
        p_value=min(1.0, 1 / last.e_value) if last.e_value > 0 else 1.0,
        child_hash=child.hash,
        patch=patch_text,
        diff=diff,
        pairs=pairs,
        eval_tokens=sum(r.prompt_tokens + r.completion_tokens for r in child_rows.values()),
        batch_size=len(batch_tasks),
        control_size=len(control_tasks),
        design="sequential",
        level=level,
        looks=looks,
    )


def fresh_seeds(evaluation: EvalRequest, count: int, skip: int = 0) -> list[int]:
    """``count`` seeds after the ones an evaluation of the split uses (``skip`` more)."""
    first = evaluation.seed + evaluation.rollouts + skip
    return list(range(first, first + count))


def confirm(
    parent: HarnessSpec,
    child: HarnessSpec,
    tasks: Sequence[str],
    evaluation: EvalRequest,
    store: Any,
    seeds: int,
    alpha: float,
    min_net: int,
    progress: Progress | None = None,
) -> Confirmation:
    """Parent and child on ``tasks`` at ``seeds`` fresh seeds: the sign test over the pairs
    where exactly one of them succeeds, with the same ``alpha`` and ``min_net``."""
    chosen = fresh_seeds(evaluation, seeds)
    pairs = [(t, s) for t in tasks for s in chosen]
    before = {
        (r.task_id, r.seed): r.success for r in _run(evaluation, parent, pairs, store, progress)
    }
    after = {
        (r.task_id, r.seed): r.success for r in _run(evaluation, child, pairs, store, progress)
    }
    wins = sum(1 for p in pairs if after.get(p) and not before.get(p))
    losses = sum(1 for p in pairs if before.get(p) and not after.get(p))
    rule = judge(wins, losses, len(pairs), len(pairs), alpha=alpha, min_net=min_net)
    said = (
        f"fresh seeds {chosen[0]}-{chosen[-1]}: {wins} wins, {losses} losses, p={rule.p_value:.3f}"
    )
    return Confirmation(
        seeds=chosen,
        pairs=len(pairs),
        wins=wins,
        losses=losses,
        p_value=rule.p_value,
        accepted=rule.accepted,
        reason=f"confirmed on {said}" if rule.accepted else f"not confirmed on {said}",
    )


def _run(evaluation: EvalRequest, child: HarnessSpec, pairs: list, store: Any, progress) -> list:
    from ..run.evaluate import evaluate

    request = replace(evaluation, harness=child, pairs=[tuple(p) for p in pairs])
    return evaluate(request, store, progress=progress).complete(child.name).rows


def _pair(row: Any, pair: tuple, role: Literal["batch", "control"]) -> PairResult:
    return PairResult(
        task_id=pair[0],
        seed=pair[1],
        role=role,
        success=bool(row is not None and row.success),
        outcome=None if row is None else row.outcome,
        rollout_id=None if row is None else row.id,
        tokens=0 if row is None else row.prompt_tokens + row.completion_tokens,
    )


def _pair_in(value: Any) -> Any:
    if isinstance(value, Mapping):
        return (value.get("task_id"), value.get("seed"))
    return value


RecordedPair = Annotated[
    tuple[str, int],
    BeforeValidator(_pair_in),
    PlainSerializer(lambda p: {"task_id": p[0], "seed": p[1]}, return_type=dict),
]
"""A (task, seed) pair as a record holds it: ``{"task_id", "seed"}``, so that every value of a
JSON column has one type (Arrow, hence ``datasets``, refuses a ``[str, int]`` list); records
of schema 2 hold ``[task, seed]`` and still load. In Python it is a tuple."""


class TreeFile(BaseModel):
    """One file of a :class:`HarnessTree`."""

    model_config = ConfigDict(extra="forbid")
    path: str
    """Relative to the harness directory, ``/``-separated."""
    content: str
    encoding: Literal["utf-8", "base64"] = "utf-8"
    """``utf-8``: ``content`` is the text; ``base64``: the bytes of a file that is not text."""
    executable: bool = False
    """The owner's executable bit, part of the content hash."""


class HarnessTree(BaseModel):
    """A harness directory as data: every file its content hash covers, so a record that
    carries it can rebuild the harness (same hash) anywhere, without a workspace."""

    model_config = ConfigDict(extra="forbid")
    name: str
    hash: str
    files: list[TreeFile]

    @classmethod
    def of(cls, spec: HarnessSpec) -> HarnessTree:
        from ..trees import read_tree

        files = []
        for f in read_tree(spec.path):
            encoding: Literal["utf-8", "base64"] = "utf-8"
            try:
                content = f.data.decode("utf-8")
            except UnicodeDecodeError:
                content, encoding = base64.b64encode(f.data).decode("ascii"), "base64"
            files.append(
                TreeFile(path=f.rel, content=content, encoding=encoding, executable=f.executable)
            )
        return cls(name=spec.name, hash=spec.hash, files=files)

    def materialize(self, root: Path) -> HarnessSpec:
        """Write the tree to ``root/<name>`` and load it; ``HarnessctlError`` unless its
        content hash is :attr:`hash` (a record edited by hand, or damaged)."""
        from ..harness import NAME_RE, load_harness

        dest = Path(root) / (self.name if NAME_RE.match(self.name) else "parent")
        for item in self.files:
            rel = PurePosixPath(item.path)
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise HarnessctlError(f"harness tree {self.name}: {item.path!r} is not inside it")
            target = dest.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            if item.encoding == "base64":
                target.write_bytes(base64.b64decode(item.content))
            else:
                target.write_bytes(item.content.encode("utf-8"))
            if item.executable:
                target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        spec = load_harness(dest)
        if spec.hash != self.hash:
            raise HarnessctlError(
                f"harness tree {self.name}: its files hash to {spec.hash[:12]}, "
                f"the record says {self.hash[:12]}"
            )
        return spec


class RewardRecipe(BaseModel):
    """How to score a completion for one edit context: call ``function`` (a dotted path;
    ``reward_for_record(record, completion, ...)``) with the record. Every input of
    :func:`judge_edit` is here; fields left None (records from before they were recorded)
    make the recipe unexecutable, and :func:`reward_for_record` says which."""

    model_config = ConfigDict(extra="forbid")
    kind: str = "same_batch_paired"
    function: str = REWARD_FUNCTION
    parent_hash: str
    parent_name: str | None = None
    parent_tree: HarnessTree | None = None
    """The parent harness's files (exports of schema 3): the record rebuilds its parent
    without the workspace it came from."""
    suite: str
    """The suite id (``name@hash`` of its task files)."""
    suite_path: str | None = None
    """The suite directory, relative to the workspace when inside it."""
    split: str
    policy_id: str
    policy_model: str | None = None
    policy_params: dict | None = None
    """The policy's parameters without credentials (never recorded: a provider that needs
    one reads it from its environment variable, or pass ``policy=``)."""
    batch: list[RecordedPair]
    control: list[RecordedPair]
    dropped_pairs: int = 0
    """Pairs of the original judgement left out of this record (tasks of the other dataset
    split): the reward is over the pairs here, fewer than the judgement's."""
    alpha: float | None = None
    min_net: int | None = None
    direction: dict | None = None
    """The direction's full spec (scope and budget the patch is validated against)."""
    manifest_update: dict | None = None
    """The child's manifest fields (same fields, same patch: the same child hash)."""
    limits: dict | None = None
    max_calls: int | None = None
    max_tokens: int | None = None
    invalid_reward: float = INVALID_REWARD
    formula: str = "(rescues - regressions) / (len(batch) + len(control))"
    accept_rule: dict = {}
    gate: dict | None = None
    """The sequential gate's plan (:class:`harnessctl.evolve.gate.GatePlan` fields) when the
    edit was judged by it (kind ``fresh_paired``): parent and child run the tasks of
    ``batch`` and ``control`` at ``seeds`` (the fresh seeds the judgement used), reward
    (wins - losses) / pairs; without ``seeds`` (an attempt that never ran) the gate runs
    look by look at ``level``. None: the same-batch re-run of exactly those pairs."""
    seeds: list[int] | None = None
    """The fresh seeds the sequential judgement ran (every judged task at each)."""
    level: float | None = None
    """The sequential test's level the judgement ran at (alpha shared out by the run)."""
    seed: int = 0
    rollouts: int | None = None
    """The parent evaluation's first seed and seeds per task: the fresh seeds a sequential
    judgement runs come after them (None: records from before they were kept)."""

    @field_validator("policy_params", mode="before")
    @classmethod
    def _no_nulls(cls, value: Any) -> Any:
        # a column of dicts read through Arrow gets every key any row has, None where absent
        if isinstance(value, Mapping):
            return {k: v for k, v in value.items() if v is not None}
        return value


def recipe_verdict(recipe: RewardRecipe, success: Mapping[Pair, bool]) -> Verdict:
    """What ``recipe`` gives a child whose outcome on each of its pairs is ``success[pair]``,
    without running anything. A pair missing from ``success`` counts as a failure, as a
    pair without a result does in :func:`judge_edit`."""
    rescues = sum(1 for p in recipe.batch if success.get(p, False))
    regressions = sum(1 for p in recipe.control if not success.get(p, False))
    return judge(
        rescues,
        regressions,
        len(recipe.batch),
        len(recipe.control),
        alpha=recipe.alpha if recipe.alpha is not None else 0.1,
        min_net=recipe.min_net if recipe.min_net is not None else 1,
    )


def reward_for_record(
    record: Any,
    completion: str,
    *,
    workspace: Any = None,
    suite: Any = None,
    store: Any = None,
    policy: Policy | None = None,
    sandbox: str | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    parent: HarnessSpec | None = None,
) -> EditVerdict:
    """Score ``completion`` for an exported GRPO record (the model, a dict, a JSON line, or
    its ``reward`` recipe alone).

    Where each input comes from:

    - the parent harness: ``parent`` (it must have the recipe's hash); else ``workspace``
      (a ``Workspace`` or its directory), found under ``harnesses/`` by content hash; else
      the record's ``parent_tree``, written to a temporary directory (removed afterwards);
    - the tasks: ``suite`` (a suite directory or a loaded ``Suite``), else the workspace's
      ``suite_path``; either way its id must be the recipe's ``suite``;
    - rollouts: ``store``, else the workspace's store (rollouts already there are reused),
      else a temporary store (every rollout runs);
    - the policy: the recorded model and parameters; ``policy`` replaces them (it must have
      the recorded id) when a credential must be given in code;
    - sandbox and workers: the arguments, else the workspace's settings, else
      ``$HARNESSCTL_SANDBOX`` / ``$HARNESSCTL_WORKERS``, else ``local`` and 2.
    """
    from ..constants import ENV_SANDBOX, ENV_WORKERS
    from ..policy import Policy
    from ..run.evaluate import EvalRequest
    from ..sandbox import Limits
    from ..store import Store
    from ..suite import Suite, load_suite
    from ..workspace import Workspace, load_workspace

    recipe = load_recipe(record)
    required = ["policy_model", "direction", "manifest_update", "limits"]
    missing = [name for name in required if getattr(recipe, name) is None]
    if suite is None and recipe.suite_path is None:
        missing.insert(0, "suite_path")
    if missing:
        raise HarnessctlError(
            f"the reward recipe lacks {', '.join(missing)}: its edit was recorded before "
            "harnessctl kept them (re-run the evolve to record executable recipes)"
        )
    ws = None
    if workspace is not None:
        ws = workspace if isinstance(workspace, Workspace) else load_workspace(Path(workspace))
    scratch = Path(tempfile.mkdtemp(prefix="hxreward-"))
    try:
        if parent is None:
            parent = _parent_of(recipe, ws, scratch)
        elif parent.hash != recipe.parent_hash:
            raise HarnessctlError(
                f"parent {parent.name} is {parent.hash[:12]}, "
                f"the recipe's {recipe.parent_hash[:12]}"
            )
        if isinstance(suite, Suite):
            tasks = suite
        elif suite is not None:
            tasks = load_suite(Path(suite))
        elif ws is not None:
            tasks = ws.load_suite(recipe.suite_path)
        else:
            raise HarnessctlError("pass suite= (the suite directory) or workspace=")
        if tasks.id != recipe.suite:
            raise HarnessctlError(f"suite {tasks.root} is {tasks.id}, the recipe's {recipe.suite}")
        policy = policy or Policy(recipe.policy_model or "", dict(recipe.policy_params or {}))
        if policy.id != recipe.policy_id:
            raise HarnessctlError(
                f"policy {policy.id} is not the recipe's {recipe.policy_id} (pass policy= with "
                "the recorded model and parameters)"
            )
        evaluation = EvalRequest(
            harness=parent,
            suite=tasks,
            split=recipe.split,
            policy=policy,
            limits=Limits(**(recipe.limits or {})),
            max_calls=recipe.max_calls or None,
            max_tokens=recipe.max_tokens or None,
            sandbox=sandbox
            or (ws.config.sandbox if ws else os.environ.get(ENV_SANDBOX) or "local"),
            workers=workers or (ws.config.workers if ws else int(os.environ.get(ENV_WORKERS, 2))),
            command="reward",
            seed=recipe.seed,
            rollouts=recipe.rollouts or 3,  # 3: EvalRequest's default, as before it was kept
        )
        if store is not None:
            db, opened = store, False
        elif ws is not None:
            db, opened = ws.open_store(), True
        else:
            db, opened = Store(f"sqlite:///{scratch / 'store.db'}", scratch / "trajectories"), True
        try:
            verdict = judge_edit(
                parent,
                Direction.model_validate(recipe.direction),
                completion,
                batch=recipe.batch,
                control=recipe.control,
                evaluation=evaluation,
                store=db,
                alpha=recipe.alpha if recipe.alpha is not None else 0.1,
                min_net=recipe.min_net if recipe.min_net is not None else 1,
                manifest_update=recipe.manifest_update,
                progress=progress,
                gate=GatePlan(**recipe.gate) if recipe.gate is not None else None,
                level=recipe.level,
                fixed_seeds=recipe.seeds if recipe.gate is not None else None,
            )
        finally:
            if opened:
                db.close()
        if verdict.status == "rejected":  # the recipe defines what an invalid patch earns
            return verdict.model_copy(update={"reward": recipe.invalid_reward})
        return verdict
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _parent_of(recipe: RewardRecipe, ws: Any, scratch: Path) -> HarnessSpec:
    """The recipe's parent: the workspace's harness with its hash, else its recorded tree."""
    tree = recipe.parent_tree
    if ws is not None:
        try:
            return find_harness(ws, recipe.parent_hash, recipe.parent_name)
        except HarnessctlError:
            if tree is None:
                raise
    if tree is None:
        raise HarnessctlError(
            f"the record carries no parent harness tree (exported before schema 3): pass "
            f"workspace= holding harness {recipe.parent_hash[:12]}"
        )
    if tree.hash != recipe.parent_hash:
        raise HarnessctlError(
            f"the record's parent tree is {tree.hash[:12]}, its recipe's parent "
            f"{recipe.parent_hash[:12]}"
        )
    return tree.materialize(scratch / "parent")


def load_recipe(record: Any) -> RewardRecipe:
    """The reward recipe of a GRPO record (model, dict or JSON line), or the recipe itself
    (a :class:`RewardRecipe` or its dict: the ``reward`` column a trainer passes on)."""
    if isinstance(record, RewardRecipe):
        return record
    if isinstance(record, str | bytes):
        record = json.loads(record)
    if isinstance(record, Mapping) and "parent_hash" in record and "batch" in record:
        return RewardRecipe.model_validate(dict(record))
    data = record.get("reward") if isinstance(record, Mapping) else getattr(record, "reward", None)
    if data is None:
        raise HarnessctlError("not a GRPO record: it has no 'reward' recipe")
    return data if isinstance(data, RewardRecipe) else RewardRecipe.model_validate(data)


def find_harness(ws: Any, content_hash: str, name: str | None = None) -> HarnessSpec:
    """The harness under the workspace's ``harnesses/`` whose content hash is ``content_hash``."""
    from ..errors import ConfigError
    from ..harness import load_harness

    named = ws.harness_dir(name) if name else None
    for path in ([named] if named else []) + ws.harness_dirs():
        try:
            spec = load_harness(path)
        except ConfigError:
            continue
        if spec.hash == content_hash:
            return spec
    raise HarnessctlError(f"no harness with hash {content_hash[:12]} under {ws.harnesses_dir}")
