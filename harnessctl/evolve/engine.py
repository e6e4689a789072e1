"""The evolve loop: per direction, a chain of rounds; each round edits the best accepted
variant of that direction, validates the patch, judges the child against its parent (the
gate, :mod:`.gate`, on fresh seeds of the judged tasks; then the split guard, :mod:`.guard`,
on every task of the split), and commits accepted children as new directories under
``harnesses/``. The judgement is :func:`harnessctl.evolve.reward.judge_edit` (a library
function a trainer calls too); the engine alone writes edit records, editor calls and git
commits. Before the first edit it says what its budget buys (:mod:`.power`) and what the
workspace already judged on this base and split (:mod:`.history`).

Resumable by construction: rollouts are cached by key, edits are recorded under a
deterministic key (evolve id, parent hash, direction, round, attempt) and reused on a rerun,
and a commit is found again by its ``Harness-Edit-Id`` trailer.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

from pydantic import Field

from ..errors import HarnessctlError
from ..gateway.protocol import redact
from ..harness import HarnessSpec, load_harness
from ..records import Record
from ..run.evaluate import EvalRequest, evaluate
from ..trees import copy_tree
from .digest import digest
from .directions import Direction
from .editors import EditContext, Editor
from .gate import ErrorControl, GatePlan, select_tasks
from .history import History, workspace_history
from .power import Budget
from .reproduce import reproduce
from .reward import EditVerdict, RewardRecipe, child_manifest, judge_edit
from .validate import scope_files

Log = Callable[[str, str], None]  # (direction, message)
EVOLVE_RESULT_VERSION = 1


@dataclass
class EvolveRequest:
    base: HarnessSpec
    eval: EvalRequest  # suite, split, policy, rollouts, workers, sandbox, limits
    directions: list[Direction]
    editor: Editor
    rounds: int = 2
    batch_size: int | None = None
    """Failures shown to the editor and judged: tasks under the sequential gate (default 8),
    pairs under the same-batch one (default 12)."""
    control_size: int | None = None
    """Successes judged for regressions: tasks (sequential, default 4) or pairs (same-batch,
    default 12)."""
    alpha: float = 0.1
    min_net: int = 1
    confirm_seeds: int = 0
    """Same-batch gate only: fresh seeds of the confirmation an edit that passes the
    same-batch test must pass too (0: none; docs/decisions.md, "Certified acceptance")."""
    gate: Literal["sequential", "same-batch"] = "sequential"
    """How an edit is judged (:mod:`harnessctl.evolve.gate`; docs/decisions.md, "The gate")."""
    error_control: Literal["fdr", "fwer", "none"] = "fdr"
    """How the run's judgements share ``alpha`` (sequential gate)."""
    max_looks: int = 30
    """Sequential gate: the most fresh seeds of the judged tasks one judgement runs."""
    design: Literal["auto", "sequential", "fixed"] = "auto"
    """Sequential gate: the test a judgement runs; ``auto`` takes the fixed-sample sign test
    below :data:`.gate.FIXED_BELOW_PAIRS` pairs, the anytime-valid e-value test above."""
    guard: bool = True
    """Sequential gate: commit an edit only if the split guard (:mod:`.guard`) also finds the
    child better on the whole split."""
    guard_alpha: float | None = None
    """The split guard's own error budget over the run (None: ``alpha``)."""
    error_scope: Literal["run", "workspace"] = "run"
    """Whose judgements the error control covers (:mod:`.history`)."""
    allow_weak_gate: bool = False
    """Run even when the budget detects no effect with power 0.8 (:mod:`.power`)."""
    editor_retries: int = 2
    max_edits: int | None = None
    max_editor_cost: float | None = None

    def __post_init__(self) -> None:
        sequential = self.gate == "sequential"
        if self.batch_size is None:
            self.batch_size = 8 if sequential else 12
        if self.control_size is None:
            self.control_size = 4 if sequential else 12
        if sequential and self.confirm_seeds:
            raise HarnessctlError(
                "--confirm-seeds applies to --gate same-batch only (the sequential gate "
                "judges on fresh seeds already)"
            )
        if self.guard_alpha is not None and not 0 < self.guard_alpha <= 1:
            raise HarnessctlError(f"--guard-alpha {self.guard_alpha} is not in (0, 1]")

    @property
    def plan(self) -> GatePlan | None:
        """The sequential gate's plan (None under the same-batch gate)."""
        if self.gate != "sequential":
            return None
        from .power import plan_for

        return plan_for(self.max_looks, self.min_net, self.design)

    @property
    def guarded(self) -> bool:
        return self.gate == "sequential" and self.guard

    def controls(self, share: float = 1.0) -> tuple[ErrorControl, ErrorControl]:
        """How the run's ``directions x rounds`` judgements share ``alpha`` (the gate) and
        ``guard_alpha`` (the split guard), the run holding ``share`` of a longer sequence's
        budget; the same-batch gate applies none (each judgement at ``alpha``)."""
        kind = self.error_control if self.gate == "sequential" else "none"
        m = max(1, len(self.directions) * self.rounds)
        guard_alpha = self.guard_alpha if self.guard_alpha is not None else self.alpha
        return (
            ErrorControl(kind, self.alpha, m, share),
            ErrorControl(kind, guard_alpha, m, share),
        )

    @property
    def control(self) -> ErrorControl:
        """The gate's error control for a run on its own."""
        return self.controls()[0]


@dataclass
class Variant:
    name: str
    direction: str
    hash: str
    parent: str
    edit_id: str
    round: int
    commit: str | None
    rescues: int = 0
    regressions: int = 0
    success_rate: float = 0.0
    cost_usd: float = 0.0
    rescued_pairs: list[tuple[str, int]] = field(default_factory=list)
    reproduction: dict | None = None  # Reproduction.summary() of the edit's claimed rescues


class VariantRecord(Record):
    """An accepted child harness, as ``evolve --json`` lists it."""

    name: str
    direction: str
    hash: str
    parent: str
    """The parent harness's name."""
    edit_id: str
    round: int
    commit: str | None
    """The git commit that added its directory."""
    rescues: int = 0
    """Pairs the base failed that it solved on the whole split (0 unless it is its
    direction's best variant)."""
    regressions: int = 0
    success_rate: float = 0.0
    cost_usd: float = 0.0
    """What the editor spent on the edit."""
    reproduction: dict | None = None
    """Its claimed rescues re-tested on fresh seeds and held-out tasks
    (:meth:`harnessctl.evolve.reproduce.Reproduction.summary`): claimed, tested, reproduced,
    fraction (None: nothing re-testable), fresh_seeds and held_out as [reproduced, tested]."""


class BestVariant(Record):
    """The last accepted variant of a direction, judged on the whole split."""

    name: str
    rescues: int
    regressions: int
    success_rate: float


class EditOutcome(Record):
    """One editor proposal and what became of it (the store's ``EditRow`` has the rest)."""

    id: str
    direction: str
    round: int
    attempt: int
    status: str
    """``rejected``, ``evaluated`` or ``accepted``."""
    reason: str | None = None
    rescues: int = 0
    regressions: int = 0
    reward: float = 0.0


class EvolveRecord(Record):
    """``harnessctl evolve --json`` (``EvolveResult.record()``)."""

    kind: Literal["evolve"] = "evolve"
    version: int = EVOLVE_RESULT_VERSION
    evolve_id: str
    base_success: float
    union_rescues: int
    """Distinct pairs rescued by any direction's best variant."""
    stopped: str | None = None
    """Why the run stopped early (a budget), if it did."""
    gate: str = "same-batch"
    """How edits were judged: ``sequential`` or ``same-batch``."""
    error_control: str = ""
    """The error control the run applied, in words (what evolve prints)."""
    variants: list[VariantRecord] = Field(default_factory=list)
    """Every accepted child, in order."""
    best: dict[str, BestVariant] = Field(default_factory=dict)
    """Direction -> its last accepted variant."""
    edits: list[EditOutcome] = Field(default_factory=list)
    guard: str = ""
    """The split guard the run applied, in words ("" when none)."""
    budget: dict | None = None
    """What the budget buys (:class:`harnessctl.evolve.power.Budget`), printed before the
    first edit."""
    history: dict | None = None
    """The workspace's earlier judgements on this base and split
    (:class:`harnessctl.evolve.history.History`)."""


@dataclass
class EvolveResult:
    evolve_id: str
    base_success: float
    variants: list[Variant]  # every accepted child, in order
    best: dict[str, Variant]  # direction -> last accepted variant
    edits: list  # EditRow
    union_rescues: int = 0
    stopped: str | None = None
    gate: str = "same-batch"
    error_control: str = ""
    guard: str = ""
    budget: dict | None = None
    history: dict | None = None

    def record(self) -> EvolveRecord:
        """What ``evolve --json`` prints: this result, typed and versioned."""
        return EvolveRecord(
            evolve_id=self.evolve_id,
            base_success=self.base_success,
            union_rescues=self.union_rescues,
            stopped=self.stopped,
            gate=self.gate,
            error_control=self.error_control,
            guard=self.guard,
            budget=self.budget,
            history=self.history,
            variants=[VariantRecord.model_validate(v, from_attributes=True) for v in self.variants],
            best={
                d: BestVariant.model_validate(v, from_attributes=True) for d, v in self.best.items()
            },
            edits=[EditOutcome.model_validate(e, from_attributes=True) for e in self.edits],
        )


def evolve_id(req: EvolveRequest) -> str:
    """Everything that can change what an evolve run proposes or accepts: base, suite, split,
    policy, budgets, the editor with its parameters (credentials left out), the directions'
    definitions, rounds, batch sizes and the acceptance rule. A rerun with all of them equal
    resumes (replays its recorded edits); any change is a new run with new edits."""
    from ..run.evaluate import budget_key

    blob = json.dumps(
        [
            req.base.hash,
            req.eval.suite.id,
            req.eval.split,
            req.eval.policy.id,
            editor_identity(req.editor),
            req.eval.rollouts,
            req.eval.seed,
            budget_key(req.eval),
            req.batch_size,
            req.control_size,
            [d.model_dump(mode="json") for d in req.directions],
            req.rounds,
            req.alpha,
            req.min_net,
            req.editor_retries,
            *([req.confirm_seeds] if req.confirm_seeds else []),  # ids of runs without one stay
            *([req.gate, req.error_control, req.max_looks] if req.gate == "sequential" else []),
            # the split guard, the design and the scope (issue #54) change what is accepted
            *(["guard", req.guard_alpha] if req.guarded else []),
            *([req.design] if req.design != "auto" else []),
            *([req.error_scope] if req.error_scope != "run" else []),
        ],
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _edit_id_of(directory: Path) -> str | None:
    """The ``edit_id`` a harness directory's manifest records (None: none, or unreadable)."""
    try:
        return load_harness(directory).manifest.edit_id
    except HarnessctlError:  # a broken or foreign directory is not ours either
        return None


def editor_identity(editor: Editor) -> str:
    """The editor's name and parameters: its ``identity`` where it has one, else its name
    with its non-secret ``params`` (an LLM editor's ``api_base``, temperature...)."""
    identity = getattr(editor, "identity", None)
    if isinstance(identity, str):
        return identity
    params = redact(dict(getattr(editor, "params", None) or {}))
    return json.dumps([editor.name, params], sort_keys=True, default=str)


class Engine:
    def __init__(
        self, req: EvolveRequest, workspace, store, log: Log | None = None, progress=None
    ) -> None:
        self.req, self.ws, self.store = req, workspace, store
        self.log = log or (lambda d, m: None)
        self.progress = progress
        self.id = evolve_id(req)
        self.accepted = 0  # acceptances so far, in judgement order (the FDR level uses it)
        self.history: History | None = None
        self.gate_control, self.guard_control = req.controls()
        self.budget: Budget | None = None
        from ..sandbox import mark_owner, reap_stale

        reap_stale(prefixes=("hxevolve-",))  # staging left by an evolve killed before
        self.tmp = Path(tempfile.mkdtemp(prefix="hxevolve-"))
        mark_owner(self.tmp)

    # --- evaluation helpers ------------------------------------------------------------
    def _eval(self, harness: HarnessSpec, pairs=None):
        request = replace(self.req.eval, harness=harness, pairs=pairs, command="evolve-eval")
        return evaluate(request, self.store, progress=self.progress).complete(harness.name)

    def _budget_left(self) -> str | None:
        edits = self.store.edits(evolve_id=self.id)
        if self.req.max_edits is not None and len(edits) >= self.req.max_edits:
            return f"max edits ({self.req.max_edits}) reached"
        cost = sum(e.cost_usd for e in edits)
        if self.req.max_editor_cost is not None and cost >= self.req.max_editor_cost:
            return f"max editor cost (${self.req.max_editor_cost}) reached"
        return None

    # --- the loop ------------------------------------------------------------------------
    def run(self) -> EvolveResult:
        from ..vcs import require_repo

        require_repo(self.ws.root)
        ev = self.req.eval
        self.history = workspace_history(
            self.store, base_hash=self.req.base.hash, suite=ev.suite.id, split=ev.split,
            evolve_id=self.id, scope=self.req.error_scope,
        )  # fmt: skip
        self.accepted = self.history.accepted_before
        self.gate_control, self.guard_control = self.req.controls(self.history.share)
        self.log("", f"{self.req.gate} gate; {self.gate_control.describe()}")
        if self.req.guarded:
            self.log("", f"split guard: {self.guard_control.describe()}")
        self.log("", self.history.text())
        run = self._start_run()
        # every evaluation below is a run of its own, listed under this one
        self.req = replace(self.req, eval=replace(self.req.eval, parent_run=run.id))
        status, base_rows = "failed", []
        try:
            base_rows = self._eval(self.req.base).rows
            base_rate = sum(r.success for r in base_rows) / max(1, len(base_rows))
            self._check_budget(base_rows)
            variants: list[Variant] = []
            best: dict[str, Variant] = {}
            stopped = None
            for direction in self.req.directions:
                stopped = self._chain(direction, base_rows, variants, best) or stopped
            self._final_profiles(base_rows, best)
            union = {p for v in best.values() for p in v.rescued_pairs}
            status = "done"
            return EvolveResult(
                self.id,
                base_rate,
                variants,
                best,
                self.store.edits(evolve_id=self.id),
                len(union),
                stopped,
                self.req.gate,
                self.gate_control.describe(),
                self.guard_control.describe() if self.req.guarded else "",
                self.budget.model_dump() if self.budget is not None else None,
                self.history.model_dump() if self.history is not None else None,
            )
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            self._finish_run(run.id, status, base_rows)
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _start_run(self):
        """The evolve's own run: its figures are the base's evaluation (its membership);
        its judgements, confirmations and re-tests are runs under it."""
        from ..store import RunRow

        ev = self.req.eval
        return self.store.start_run(
            RunRow(
                command="evolve",
                harness_hash=self.req.base.hash,
                suite=ev.suite.name,
                split=ev.split,
                policy_id=ev.policy.id,
                params_json=json.dumps(ev.policy.params, sort_keys=True),
                status="running",
            )
        )

    def _finish_run(self, run_id: str, status: str, base_rows) -> None:
        from ..summary import summarize

        summary = summarize(base_rows).to_dict() | {"evolve_id": self.id}
        self.store.finish_run(run_id, status, summary if base_rows else None, base_rows)

    def _chain(self, direction: Direction, base_rows, variants, best) -> str | None:
        parent, parent_rows = self.req.base, base_rows
        for rnd in range(1, self.req.rounds + 1):
            reason = self._budget_left()
            if reason:
                self.log(direction.name, f"stopping: {reason}")
                return reason
            batch, control = self._select(direction, parent_rows)
            if not batch:
                self.log(direction.name, f"round {rnd}: no failures with targeted outcomes")
                return None
            child = self._round(direction, rnd, parent, parent_rows, batch, control)
            if child is None:
                continue
            variant, spec = child
            variants.append(variant)
            best[direction.name] = variant
            parent, parent_rows = spec, self._eval(spec).rows
        return None

    def _select(self, direction: Direction, rows):
        def order(r):
            return hashlib.sha256(f"{self.id}:{r.task_id}:{r.seed}".encode()).hexdigest()

        failures = sorted(
            (r for r in rows if not r.success and r.outcome in direction.targets), key=order
        )
        successes = sorted((r for r in rows if r.success), key=order)
        if self.req.gate == "sequential":  # tasks, each shown by one row of it
            batch, control = select_tasks(
                rows, direction.targets, self.req.batch_size or 0, self.req.control_size or 0,
                f"{self.id}:{direction.name}",
            )  # fmt: skip
            first: dict[tuple[str, bool], object] = {}
            for r in failures + successes:
                first.setdefault((r.task_id, r.success), r)
            return [first[t, False] for t in batch], [first[t, True] for t in control]
        return failures[: self.req.batch_size], successes[: self.req.control_size]

    def _tried(self, parent: HarnessSpec, direction: str) -> list[str]:
        """What editors already proposed for ``parent`` along ``direction`` under this run's
        policy, across evolve runs: a rerun does not propose a repair again, while an evolve
        of the same base under another policy (the sim, then a real model, in one
        workspace) starts afresh, since its failures are its own."""
        policy = self.req.eval.policy.id
        return [
            e.response
            for e in self.store.edits(parent_hash=parent.hash, direction=direction)
            if json.loads(e.metrics_json or "{}").get("policy_id", policy) == policy
        ]

    def _round(self, direction, rnd, parent, parent_rows, batch, control):
        from ..store import EditRow

        digests = [digest(r, self.store.trajectory(r)) for r in batch]
        ctx = EditContext(
            direction=direction,
            files=scope_files(parent, direction),
            digests=digests,
            tried=self._tried(parent, direction.name),
        )
        feedback = None
        for attempt in range(self.req.editor_retries + 1):
            key = hashlib.sha256(
                f"{self.id}:{parent.hash}:{direction.name}:{rnd}:{attempt}".encode()
            ).hexdigest()
            edit_id = key[:16]
            done = self.store.edit_by_key(key)
            if done is not None and done.status == "rejected":
                feedback = f"{done.reason}: {done.detail}"
                ctx.tried.append(done.response)
                continue
            if done is not None:
                proposal_response, editor_name = done.response, done.editor
                prompt, usage = (
                    done.prompt,
                    (done.prompt_tokens, done.completion_tokens, done.cost_usd),
                )
            else:
                proposal = self.req.editor.propose(ctx, feedback)
                if proposal is not None and proposal.calls:  # before anything can fail
                    self.store.record_calls(proposal.calls, purpose="editor", edit_id=edit_id)
                if proposal is None:
                    self.log(direction.name, f"round {rnd}: the editor has nothing to propose")
                    return None
                proposal_response, editor_name, prompt = (
                    proposal.response,
                    proposal.editor,
                    proposal.prompt,
                )
                usage = (proposal.prompt_tokens, proposal.completion_tokens, proposal.cost_usd)
            update = child_manifest(
                parent,
                direction,
                self._child_name(direction.name, rnd, edit_id),
                edit_id=edit_id,
                description=f"{self.req.base.manifest.description.strip()} "
                f"Edited along {direction.name} (round {rnd}).",
            )
            context = self._context_record(direction, ctx, batch, control, parent, update)
            row = EditRow(
                id=edit_id,
                edit_key=key,
                evolve_id=self.id,
                parent_hash=parent.hash,
                parent_name=parent.name,
                direction=direction.name,
                round=rnd,
                attempt=attempt,
                editor=editor_name,
                prompt=prompt,
                response=proposal_response,
                status="rejected",
                batch_size=len(batch),
                control_size=len(control),
                prompt_tokens=usage[0],
                completion_tokens=usage[1],
                cost_usd=usage[2],
                created_at=time.time(),
                metrics_json=json.dumps(context),
            )
            staging = self.tmp / update["name"]
            verdict = judge_edit(
                parent,
                direction,
                proposal_response,
                batch=[(r.task_id, r.seed) for r in batch],
                control=[(r.task_id, r.seed) for r in control],
                evaluation=replace(self.req.eval, command="evolve-judge"),
                store=self.store,
                alpha=self.req.alpha,
                min_net=self.req.min_net,
                manifest_update=update,
                workdir=staging,
                progress=self.progress,
                confirm_seeds=self.req.confirm_seeds,
                gate=self.req.plan,
                level=self.gate_control.level(self.accepted),
            )
            row.patch, row.diff = verdict.patch, verdict.diff
            guard = None
            if verdict.status == "evaluated" and self.req.plan is not None:
                verdict = self._fixed_reason(verdict)
                if verdict.accepted and self.req.guarded:
                    verdict, guard = self._guard(parent, staging, verdict, edit_id)
            if verdict.status == "rejected":
                row.reason, row.detail = verdict.reason, verdict.detail
                self.store.record_edit(row)
                self.log(
                    direction.name, f"round {rnd}: rejected ({verdict.reason}) {verdict.detail}"
                )
                feedback = f"{verdict.reason}: {verdict.detail}"
                ctx.tried.append(proposal_response)
                continue
            return self._record_verdict(direction, rnd, row, verdict, staging, parent, guard)
        return None

    def _check_budget(self, base_rows) -> None:
        """Say what the budget buys before the first edit; refuse one that detects nothing
        (:mod:`.power`), unless asked to run anyway."""
        plan = self.req.plan
        if plan is None or not self.req.directions:
            return
        from .guard import MAX_TASKS
        from .power import budget

        batch, control = select_tasks(
            base_rows, self.req.directions[0].targets, self.req.batch_size or 0,
            self.req.control_size or 0, f"{self.id}:{self.req.directions[0].name}",
        )  # fmt: skip
        tasks = len(batch + control) or (self.req.batch_size or 0) + (self.req.control_size or 0)
        # the judged tasks' success, shrunk towards 1/2 (Jeffreys): they were chosen because
        # the parent failed them, so their in-sample rate is biased low
        rows = [r for r in base_rows if r.task_id in set(batch)]
        p0 = (sum(r.success for r in rows) + 0.5) / (len(rows) + 1)
        split_tasks = {r.task_id for r in base_rows}
        found = budget(
            plan,
            judgements=self.gate_control.judgements,
            level=self.gate_control.level(self.accepted),
            alpha=self.req.alpha,
            tasks=tasks,
            parent_success=p0,
            guard_tasks=min(len(split_tasks), MAX_TASKS) if self.req.guarded else None,
            split_success=sum(r.success for r in base_rows) / max(1, len(base_rows)),
        )
        self.budget = found
        self.log("", found.text())
        if found.detectable is None and not self.req.allow_weak_gate:
            raise HarnessctlError(
                f"this budget ({plan.max_looks} looks, level {found.level:.4g}) detects no "
                "gain on the judged tasks with power 0.8: raise --max-looks or --alpha, or pass "
                "--allow-weak-gate to run it anyway"
            )
        if found.warning:
            self.log("", f"warning: {found.warning}")

    def _fixed_reason(self, verdict: EditVerdict) -> EditVerdict:
        """The fixed-sample design's verdict in its own terms (its test is the sign test)."""
        last = verdict.looks[-1] if verdict.looks else None
        if last is None or last.p_value is None:
            return verdict
        said = "accepted" if verdict.accepted else f"not accepted ({last.decision})"
        reason = (
            f"{said} at look {last.look}: {last.wins} wins, {last.losses} losses over "
            f"{last.pairs} fresh pairs, fixed-sample sign test p={last.p_value:.3g} (needs <= "
            f"{verdict.level:.4g})"
        )
        return verdict.model_copy(update={"reason": reason, "p_value": last.p_value})

    def _guard(self, parent, staging: Path, verdict: EditVerdict, edit_id: str):
        """The split guard (:mod:`.guard`) on a child the gate accepted."""
        from .guard import guard_edit

        plan = self.req.plan
        assert plan is not None
        return guard_edit(
            parent, load_harness(staging), verdict, replace(self.req.eval, command="evolve-guard"),
            self.store, plan=plan, level=self.guard_control.level(self.accepted),
            alpha=self.req.alpha, guard_alpha=self.guard_control.alpha, salt=edit_id,
            progress=self.progress,
        )  # fmt: skip

    def _child_name(self, direction: str, rnd: int, edit_id: str) -> str:
        """``<base>.<direction>.r<round>``, or with ``-2``, ``-3``... when that name is taken
        by another edit's tree: a name under ``harnesses/`` is never reused for a different
        tree. This edit's own directory (committed, or left by a crash before its commit)
        keeps its name, so a rerun finds it again."""
        stem = f"{self.req.base.name}.{direction}.r{rnd}"
        for n in range(1, 1000):
            name = stem if n == 1 else f"{stem}-{n}"
            target = self.ws.harnesses_dir / name
            if not target.exists() or _edit_id_of(target) == edit_id:
                return name
        raise HarnessctlError(f"{self.ws.harnesses_dir}: no free name for {stem}")

    def _context_record(self, direction, ctx, batch, control, parent, update) -> dict:
        """What the editor saw and how its edit is judged: the basis of exported datasets.

        ``reward`` is the executable recipe (:class:`RewardRecipe`) of this judgement."""
        ev = self.req.eval
        recipe = RewardRecipe(
            parent_hash=parent.hash,
            parent_name=parent.name,
            suite=ev.suite.id,
            suite_path=self._suite_path(),
            split=ev.split,
            policy_id=ev.policy.id,
            policy_model=ev.policy.model,
            policy_params=redact(ev.policy.params),
            batch=[(r.task_id, r.seed) for r in batch],
            control=[(r.task_id, r.seed) for r in control],
            alpha=self.req.alpha,
            min_net=self.req.min_net,
            direction=direction.model_dump(),
            manifest_update=update,
            limits=asdict(ev.limits),
            max_calls=ev.max_calls,
            max_tokens=ev.max_tokens,
            accept_rule={
                "alpha": self.req.alpha,
                "min_net": self.req.min_net,
                "confirm_seeds": self.req.confirm_seeds,
            },
        )
        plan = self.req.plan
        if plan is not None:
            recipe = recipe.model_copy(
                update={
                    "kind": "fresh_paired",
                    "gate": asdict(plan),
                    "level": self.gate_control.level(self.accepted),
                    "seed": ev.seed,
                    "rollouts": ev.rollouts,
                    "formula": "(wins - losses) / pairs, parent and child on every task of "
                    "batch and control at each of seeds (the fresh seeds the gate ran)",
                }
            )
        return {
            "suite": ev.suite.id,
            "split": ev.split,
            "policy_id": ev.policy.id,
            "base_hash": self.req.base.hash,
            "batch": [[r.task_id, r.seed] for r in batch],
            "control": [[r.task_id, r.seed] for r in control],
            "digests": [
                {"task_id": d.task_id, "seed": d.seed, "outcome": d.outcome, "text": d.render()}
                for d in ctx.digests
            ],
            "files": ctx.files,
            "direction": direction.model_dump(),
            "rule": {
                "alpha": self.req.alpha,
                "min_net": self.req.min_net,
                "confirm_seeds": self.req.confirm_seeds,
                "gate": self.req.gate,
                "error_control": self.gate_control.kind,
                "level": self.gate_control.level(self.accepted),
                "design": plan.design if plan is not None else None,
                "guard": self.req.guarded,
                "guard_level": self.guard_control.level(self.accepted)
                if self.req.guarded
                else None,
                "error_scope": self.req.error_scope,
                "run_share": self.gate_control.weight,
                "max_looks": self.req.max_looks,
            },
            "reward": recipe.model_dump(mode="json"),
        }

    def _suite_path(self) -> str:
        root = self.req.eval.suite.root.resolve()
        try:
            return root.relative_to(Path(self.ws.root).resolve()).as_posix()
        except ValueError:
            return str(root)

    def _record_verdict(
        self, direction, rnd, row, verdict: EditVerdict, staging: Path, parent, guard=None
    ):
        """Store the judged edit; commit an accepted child under ``harnesses/``."""
        row.status = "evaluated"
        row.rescues, row.regressions = verdict.rescues, verdict.regressions
        row.reward, row.p_value, row.reason = verdict.reward, verdict.p_value, verdict.reason
        row.child_hash = verdict.child_hash
        metrics = json.loads(row.metrics_json or "{}")
        metrics["child_eval_tokens"] = verdict.eval_tokens
        metrics["rescued"] = [list(p) for p in verdict.rescued]
        metrics["pairs"] = [p.model_dump() for p in verdict.pairs]
        if verdict.looks:
            metrics["looks"] = [look.model_dump() for look in verdict.looks]
            if isinstance(metrics.get("reward"), dict):  # the recipe replays these seeds
                metrics["reward"]["seeds"] = sorted({p.seed for p in verdict.pairs})
        if verdict.confirmation is not None:
            metrics["confirmation"] = verdict.confirmation.model_dump()
        if guard is not None:
            metrics["guard"] = guard
        row.metrics_json = json.dumps(metrics)
        self.store.record_edit(row)
        self.log(
            direction.name,
            f"round {rnd}: {verdict.reason} -> "
            f"{'accepted' if verdict.accepted else 'not accepted'}",
        )
        if not verdict.accepted:
            return None
        self.accepted += 1
        name = staging.name  # the child's name: staging is self.tmp / name
        commit = self._commit(name, staging, row, verdict)
        row.status, row.accepted, row.child_name, row.git_commit = (
            "accepted",
            True,
            name,
            commit,
        )
        self.store.record_edit(row)
        final = load_harness(self.ws.harnesses_dir / name)
        repro = reproduce(
            parent,
            final,
            verdict.rescued,
            replace(self.req.eval, command="evolve-reproduce"),
            self.store,
            salt=self.id,
            progress=self.progress,
            skip=self.req.confirm_seeds or (self.req.plan.seeds_needed(1) if self.req.plan else 0),
        )
        metrics["reproduction"] = repro.model_dump(mode="json")
        row.metrics_json = json.dumps(metrics)
        self.store.record_edit(row)
        self.log(direction.name, f"round {rnd}: claimed rescues re-tested: {repro.text()}")
        variant = Variant(
            name=name,
            direction=direction.name,
            hash=final.hash,
            parent=row.parent_name,
            edit_id=row.id,
            round=rnd,
            commit=commit,
            cost_usd=row.cost_usd,
            reproduction=repro.summary(),
        )
        return variant, final

    def _commit(self, name: str, staging: Path, row, verdict: EditVerdict) -> str:
        from ..vcs import commit_directory, find_commit

        existing = find_commit(self.ws.root, f"Harness-Edit-Id: {row.id}")
        target = self.ws.harnesses_dir / name
        if existing is not None:
            return existing
        if target.exists():  # this edit's copy, left by a crash between copy and commit
            if _edit_id_of(target) != row.id:  # _child_name never picks another's tree
                raise HarnessctlError(f"{target}: holds another edit's harness; not replaced")
            shutil.rmtree(target)
        copy_tree(staging, target, expect=verdict.child_hash)  # exactly what was judged
        if verdict.design == "sequential":
            judged = (
                f"Sequential gate: {verdict.reason} (level {verdict.level:.4g}; "
                f"{self.gate_control.describe()}). "
            )
        else:
            judged = (
                f"Same-batch reward {verdict.reward:+.3f}: rescued {verdict.rescues}/"
                f"{verdict.batch_size} failures, regressed {verdict.regressions}/"
                f"{verdict.control_size} successes (sign test p={verdict.p_value:.4f}). "
            )
        message = (
            f"evolve: {name} ({row.direction}, round {row.round})\n\n{judged}"
            f"{verdict.confirmation.reason.capitalize() + '. ' if verdict.confirmation else ''}"
            f"Editor: {row.editor}.\n\n"
            f"Harness-Parent: {row.parent_name} {row.parent_hash[:12]}\n"
            f"Harness-Direction: {row.direction}\n"
            f"Harness-Edit-Id: {row.id}\n"
            f"Harness-Hash: {verdict.child_hash}\n"
        )
        return commit_directory(self.ws.root, target, message)

    def _final_profiles(self, base_rows, best: dict[str, Variant]) -> None:
        base = {(r.task_id, r.seed): r.success for r in base_rows}
        for variant in best.values():
            spec = load_harness(self.ws.harnesses_dir / variant.name)
            rows = self._eval(spec).rows
            mine = {(r.task_id, r.seed): r.success for r in rows}
            variant.rescued_pairs = sorted(p for p, ok in mine.items() if ok and not base.get(p))
            variant.rescues = len(variant.rescued_pairs)
            variant.regressions = sum(1 for p, ok in mine.items() if not ok and base.get(p))
            variant.success_rate = sum(mine.values()) / max(1, len(mine))
