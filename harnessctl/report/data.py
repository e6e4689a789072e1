"""What a report shows, gathered from the store: the lineage of accepted edits, success per
(harness, category), the rescue matrix against the base, costs, and the rollouts behind
every cell. Harnesses are keyed by content hash, not name: a not-accepted child carries the
name an accepted sibling of a later attempt gets, and must not be mixed into its numbers.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import HarnessctlError
from ..runs import stands_for_harness

ALL = "all"  # the heatmap's overall column


@dataclass(frozen=True)
class Selection:
    """Which rollouts the heatmap, the rescue matrix and the harness costs are built from."""

    policy_id: str
    suite: str
    split: str


@dataclass
class Cell:
    """Successes over attempts, and the rollouts behind them (ids, all of them)."""

    successes: int = 0
    attempts: int = 0
    rollouts: list[Any] = field(default_factory=list)  # RolloutRow

    @property
    def rate(self) -> float:
        return self.successes / self.attempts if self.attempts else 0.0

    def add(self, row: Any) -> None:
        self.successes += bool(row.success)
        self.attempts += 1
        self.rollouts.append(row)


@dataclass
class Node:
    """A harness in the lineage; ``edit`` is the accepted edit that made it (None at a root)."""

    name: str
    hash: str
    edit: Any = None  # EditRow
    children: list[Node] = field(default_factory=list)
    not_accepted: list[Any] = field(default_factory=list)  # EditRow, rejected or evaluated


@dataclass
class HarnessCost:
    rollouts: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


@dataclass
class ReportData:
    """Everything the HTML renderer needs; built by :func:`collect`."""

    selection: Selection
    available: list[tuple[Selection, int]]  # every (policy, suite, split) with its rollouts
    roots: list[Node]
    base: Node | None
    harnesses: list[tuple[str, str]]  # (label, hash), heatmap rows in lineage order
    categories: list[str]
    heat: dict[tuple[str, str], Cell]  # (hash, category or ALL)
    rescue_tasks: list[tuple[str, str, Cell]]  # (task id, category, base cell): all failed
    rescue: dict[tuple[str, str], Cell]  # (task id, hash)
    costs: dict[str, HarnessCost]  # by hash
    edits: list[Any]  # EditRow, oldest first
    edit_cells: dict[str, Cell]  # edit id -> the child's rollouts the edit was judged on
    edit_pairs: dict[str, list[EditPair]] = field(default_factory=dict)
    """Edit id -> the judged (task, seed) pairs whose outcome the edit changed."""


@dataclass
class EditPair:
    """One (task, seed) pair an edit was judged on, parent and child rollout side by side."""

    task_id: str
    seed: int
    where: str  # "batch" (the parent's failures) or "control" (its successes)
    parent: Any  # RolloutRow
    child: Any  # RolloutRow

    @property
    def change(self) -> str:
        if self.child.success == self.parent.success:
            return "same"
        return "rescue" if self.child.success else "regression"


def available_selections(rows: list[Any]) -> list[tuple[Selection, int]]:
    """Every (policy, suite, split) that has rollouts, most rollouts first."""
    counts = Counter(Selection(r.policy_id, r.suite, r.split) for r in rows)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].policy_id, kv[0].split))


def _as_runs_report(store: Any, rows: list[Any], sel: Selection) -> list[Any]:
    """Each harness's rollouts as one run reports them (run identity): the members of its
    newest finished run on the selection that stands for it (one a person started, an
    evolve's own reporting the base's evaluation, or its evaluation in a profile or bench),
    else of its newest evaluation inside an evolve (``evolve-eval``: a child on the whole
    split, not a judgement's extra seeds); a harness with neither (a store from before runs
    recorded their membership) keeps every stored rollout."""
    chosen: dict[str, Any] = {}
    fallback: dict[str, Any] = {}
    for run in store.runs():  # newest first
        if run.status != "done" or not run.membership or not run.harness_hash:
            continue
        if run.policy_id != sel.policy_id or run.suite != sel.suite or run.split != sel.split:
            continue
        if stands_for_harness(run):
            chosen.setdefault(run.harness_hash, run)
        elif run.command == "evolve-eval":
            fallback.setdefault(run.harness_hash, run)
    keep: dict[str, set[str]] = {}
    for harness_hash, run in (fallback | chosen).items():
        keep[harness_hash] = {m.id for m in store.members(run.id)}
    return [r for r in rows if r.harness_hash not in keep or r.id in keep[r.harness_hash]]


def choose_selection(
    rows: list[Any], policy_id: str | None, suite: str | None, split: str | None
) -> Selection:
    """The selection for ``policy_id``; policy, suite and split not given default to those
    with most rollouts."""
    mine = [
        (sel, n)
        for sel, n in available_selections(rows)
        if (policy_id is None or sel.policy_id == policy_id)
        # rollouts record the suite's name; an id (name@hash) given is matched by its name
        and (suite is None or sel.suite.split("@", 1)[0] == suite.split("@", 1)[0])
        and (split is None or sel.split == split)
    ]
    if not mine:
        have = ", ".join(
            f"{s.policy_id} {s.suite} {s.split} ({n})" for s, n in available_selections(rows)
        )
        wanted = " ".join(x for x in (policy_id, suite, split) if x)
        raise HarnessctlError(f"no rollouts for {wanted}; the store has: {have or 'none'}")
    return mine[0][0]


def build_lineage(edits: list[Any]) -> list[Node]:
    """Trees of accepted edits, keyed by hash; not-accepted edits hang on their parent."""
    nodes: dict[str, Node] = {}

    def node(name: str, hash_: str) -> Node:
        if hash_ not in nodes:
            nodes[hash_] = Node(name, hash_)
        return nodes[hash_]

    children: set[str] = set()
    for e in edits:
        parent = node(e.parent_name, e.parent_hash)
        if e.accepted and e.child_hash:
            child = node(e.child_name or e.parent_name, e.child_hash)
            child.edit = e
            if child not in parent.children:
                parent.children.append(child)
            children.add(e.child_hash)
        else:
            parent.not_accepted.append(e)
    return [n for h, n in nodes.items() if h not in children]


def walk(roots: list[Node]) -> list[Node]:
    """Nodes depth first, parents before children."""
    out: list[Node] = []
    stack = list(reversed(roots))
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.children))
    return out


def _directory_hashes(harnesses_dir: Path) -> dict[str, str]:
    """Hash -> name of every harness directory that loads (hand-made harnesses included)."""
    from ..harness import load_harness

    found: dict[str, str] = {}
    if not harnesses_dir.is_dir():
        return found
    for path in sorted(harnesses_dir.iterdir()):
        if (path / "harness.yaml").is_file():
            try:
                spec = load_harness(path)
            except HarnessctlError:
                continue  # a broken directory is not the report's business
            found[spec.hash] = spec.name
    return found


def collect(
    store: Any,
    harnesses_dir: Path,
    policy_id: str | None,
    suite: str | None = None,
    split: str | None = None,
    base: str | None = None,
    split_tasks: Callable[[str, str], set[str] | None] | None = None,
) -> ReportData:
    """Gather a report's data for ``policy_id`` (policy, suite and split not given: those
    with most rollouts). ``split_tasks(suite, split)`` gives the split's task ids when the
    suite is at hand: rollouts are cache entries, so one served to this split from a run of
    another split (same task, seed, harness and policy) counts here too; without it, the
    split each rollout recorded decides."""
    everything = store.rollouts(policy_id=policy_id)
    sel = choose_selection(everything, policy_id, suite, split)
    ids = split_tasks(sel.suite, sel.split) if split_tasks is not None else None
    rows = [
        r
        for r in everything
        if r.suite == sel.suite and (r.task_id in ids if ids is not None else r.split == sel.split)
    ]
    rows = _as_runs_report(store, rows, sel)
    edits = store.edits()
    roots = build_lineage(edits)
    lineage = walk(roots)

    # Heatmap rows: the lineage, then other harnesses whose directory is in the workspace.
    names: dict[str, str] = {n.hash: n.name for n in lineage}
    for h, name in _directory_hashes(harnesses_dir).items():
        names.setdefault(h, name)
    present = {r.harness_hash for r in rows}
    order = [h for h in names if h in present]
    if not order:  # nothing known: show whatever was evaluated
        order = sorted(
            present, key=lambda h: min(r.created_at for r in rows if r.harness_hash == h)
        )
        names.update({r.harness_hash: r.harness_name for r in rows})
    clash = Counter(names[h] for h in order)
    harnesses = [(names[h] if clash[names[h]] == 1 else f"{names[h]}@{h[:8]}", h) for h in order]

    base_node = _find_base(lineage, roots, base, names)
    heat: dict[tuple[str, str], Cell] = defaultdict(Cell)
    by_task: dict[tuple[str, str], Cell] = defaultdict(Cell)
    costs: dict[str, HarnessCost] = defaultdict(HarnessCost)
    categories: set[str] = set()
    for r in rows:
        if r.harness_hash not in names:
            continue
        categories.add(r.category)
        heat[(r.harness_hash, r.category)].add(r)
        heat[(r.harness_hash, ALL)].add(r)
        by_task[(r.task_id, r.harness_hash)].add(r)
        c = costs[r.harness_hash]
        c.rollouts += 1
        c.model_calls += r.model_calls
        c.prompt_tokens += r.prompt_tokens
        c.completion_tokens += r.completion_tokens
        c.cost_usd += r.cost_usd

    rescue_tasks: list[tuple[str, str, Cell]] = []
    if base_node is not None:
        tasks = sorted({(r.task_id, r.category) for r in rows if r.harness_hash == base_node.hash})
        for task_id, category in tasks:
            cell = by_task[(task_id, base_node.hash)]
            if cell.attempts and cell.successes == 0:
                rescue_tasks.append((task_id, category, cell))
    wanted = {t for t, _, _ in rescue_tasks}
    rescue = {k: v for k, v in by_task.items() if k[0] in wanted}
    return ReportData(
        selection=sel,
        available=available_selections(everything),
        roots=roots,
        base=base_node,
        harnesses=harnesses,
        categories=sorted(categories),
        heat=dict(heat),
        rescue_tasks=rescue_tasks,
        rescue=rescue,
        costs=dict(costs),
        edits=edits,
        edit_cells=_edit_cells(store, edits),
        edit_pairs=_edit_pairs(store, edits),
    )


def _find_base(
    lineage: list[Node], roots: list[Node], base: str | None, names: dict[str, str]
) -> Node | None:
    if base is None:
        # The root with the largest tree: the harness an evolve run started from.
        return max(roots, key=lambda r: len(walk([r])), default=None)
    for n in lineage:
        if n.name == base or n.hash.startswith(base):
            return n
    for h, name in names.items():
        if name == base or h.startswith(base):
            return Node(name, h)
    raise HarnessctlError(f"base harness {base!r}: not in the lineage or under harnesses/")


def _edit_cells(store: Any, edits: list[Any]) -> dict[str, Cell]:
    """For each judged edit, the child's rollouts on its batch and control pairs."""
    cells: dict[str, Cell] = {}
    for e in edits:
        if not e.child_hash:
            continue
        metrics = json.loads(e.metrics_json or "{}")
        pairs = {(t, s) for t, s in metrics.get("batch", []) + metrics.get("control", [])}
        policy = metrics.get("policy_id")
        cell = Cell()
        for r in store.rollouts(harness_hash=e.child_hash, policy_id=policy):
            if (r.task_id, r.seed) in pairs and r.split == metrics.get("split", r.split):
                cell.add(r)
        cells[e.id] = cell
    return cells


def _judged_rows(store: Any, harness_hash: str, metrics: dict[str, Any]) -> dict:
    """``(task, seed) -> row`` of ``harness_hash`` on an edit's judged pairs (newest wins)."""
    pairs = {(t, s) for t, s in metrics.get("batch", []) + metrics.get("control", [])}
    found: dict[tuple[str, int], Any] = {}
    for r in store.rollouts(harness_hash=harness_hash, policy_id=metrics.get("policy_id")):
        if (r.task_id, r.seed) in pairs and r.split == metrics.get("split", r.split):
            found[(r.task_id, r.seed)] = r
    return found


def _edit_pairs(store: Any, edits: list[Any]) -> dict[str, list[EditPair]]:
    """For each judged edit, the pairs of its batch and control whose outcome changed from
    parent to child: the rescues and regressions its reward and sign test counted."""
    out: dict[str, list[EditPair]] = {}
    for e in edits:
        if not e.child_hash:
            continue
        metrics = json.loads(e.metrics_json or "{}")
        parent = _judged_rows(store, e.parent_hash, metrics)
        child = _judged_rows(store, e.child_hash, metrics)
        changed = []
        for where in ("batch", "control"):
            for task_id, seed in metrics.get(where, []):
                a, b = parent.get((task_id, seed)), child.get((task_id, seed))
                if a is not None and b is not None and bool(a.success) != bool(b.success):
                    changed.append(EditPair(task_id, int(seed), where, a, b))
        out[e.id] = changed
    return out
