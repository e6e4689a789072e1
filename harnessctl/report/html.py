"""Render :class:`ReportData` as one self-contained HTML page.

Every table cell with rollouts behind it links (``data-cell``) to an entry of the embedded
JSON blob, which lists at most ``per_cell`` of them; the inline script renders their compact
trajectories in the page's trajectory section. Nothing is fetched from anywhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html import escape
from typing import Any

from .assets import CSS, JS
from .data import ALL, Cell, EditPair, Node, ReportData, walk
from .legend import judged, legend, reproduced


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def script_json(payload: Any) -> str:
    """``payload`` as JSON that is inert inside a ``<script>`` element in every state of an
    HTML parser: with no ``<`` (nor ``>``, ``&``) left, neither ``</script``, ``<!--`` nor
    ``<script`` can occur (``<!--<script>`` in a string would otherwise switch the parser
    to its double-escaped state, and the rest of the page, the viewer's own script
    included, would become part of this element). The characters only occur inside JSON
    strings, where ``\\u003c`` means the same."""
    text = json.dumps(payload, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _color(rate: float) -> str:
    """Red (0) through yellow to green (1), light enough for dark text."""
    return f"hsl({round(120 * rate)},62%,80%)"


@dataclass
class Links:
    """The cells linked so far: id -> title, shown rollout ids, total; and the rows to embed."""

    per_cell: int
    cells: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: list[Any] = field(default_factory=list)

    def add(self, cell: Cell, title: str) -> str:
        # Failures first: they are what a reader opens a cell for.
        chosen = sorted(cell.rollouts, key=lambda r: (r.success, r.task_id, r.seed, r.id))
        return self._add(chosen[: self.per_cell], title, len(cell.rollouts), pair=False)

    def add_pair(self, pair: EditPair, title: str) -> str:
        """Parent and child rollouts of one judged pair, shown side by side."""
        return self._add([pair.parent, pair.child], title, 2, pair=True)

    def _add(self, chosen: list[Any], title: str, total: int, *, pair: bool) -> str:
        key = f"c{len(self.cells)}"
        self.cells[key] = {
            "title": title,
            "ids": [r.id for r in chosen],
            "shown": len(chosen),
            "total": total,
            "pair": pair,
        }
        self.rows.extend(chosen)
        return key


def _cell_td(links: Links, cell: Cell | None, title: str, *, colored: bool = True) -> str:
    if cell is None or not cell.attempts:
        return '<td class="cell empty">&ndash;</td>'
    key = links.add(cell, title)
    style = f' style="background:{_color(cell.rate)}"' if colored else ""
    text = f"{cell.successes}/{cell.attempts}"
    return (
        f'<td class="cell"{style} title="{_e(title)}"><a href="#trajectories" '
        f'data-cell="{key}">{text}</a></td>'
    )


def _lineage(data: ReportData, links: Links, labels: dict[str, str]) -> str:
    if not data.roots:
        return '<p class="note">No edits recorded: run <code>harnessctl evolve</code>.</p>'

    def node_html(n: Node) -> str:
        overall = data.heat.get((n.hash, ALL))
        rate = ""
        if overall is not None:
            key = links.add(overall, f"{labels.get(n.hash, n.name)}: all rollouts")
            rate = (
                f' <a href="#trajectories" data-cell="{key}">{100 * overall.rate:.1f}% '
                f"({overall.successes}/{overall.attempts})</a>"
            )
        edge = ""
        if n.edit is not None:
            e = n.edit
            edge = (
                f'<span class="edge">{_e(e.direction)} &middot; reward {e.reward:+.3f} &middot; '
                f"{judged(e)} &middot; r{e.round}{reproduced(e)}</span>"
            )
        cls = "node" if n.edit is not None else "node root"
        head = (
            f'{edge}<span class="{cls}" data-harness="{_e(n.name)}">{_e(n.name)} '
            f'<span class="mono meta">{n.hash[:12]}</span>{rate}</span>'
        )
        rej = ""
        if n.not_accepted:
            items = "".join(
                f"<li>{_tag(e)} {_e(e.direction)} r{e.round}.{e.attempt}: {_e(e.reason or '')}"
                f"{_detail(e)}</li>"
                for e in n.not_accepted
            )
            rej = f'<ul class="rej"><li>not accepted from {_e(n.name)}:<ul>{items}</ul></li></ul>'
        kids = "".join(f"<li>{node_html(c)}</li>" for c in n.children)
        return head + rej + (f"<ul>{kids}</ul>" if kids else "")

    trees = "".join(f"<li>{node_html(r)}</li>" for r in data.roots)
    return f'<ul class="tree" id="lineage-tree">{trees}</ul>'


def _p(p: float | None) -> str:
    return "" if p is None else f" &middot; p={p:.3f}"


def _tag(e: Any) -> str:
    return (
        '<span class="tag ev">evaluated</span>'
        if e.status == "evaluated"
        else ('<span class="tag">rejected</span>')
    )


def _detail(e: Any) -> str:
    if e.status == "evaluated":
        return (
            f" (+{e.rescues}/{e.batch_size} &minus;{e.regressions}/{e.control_size}{_p(e.p_value)})"
        )
    text = (e.detail or "").strip().splitlines()
    return f' <span class="mono">{_e(text[0][:160])}</span>' if text else ""


_BREAKS = ("-", "_", "/", ".", ":")


def _breakable(name: str) -> str:
    """``name`` escaped, with a line-break opportunity after each separator, so a long
    category name (``pick_clean_then_place_in_recep``) wraps inside its narrow column
    instead of running over its neighbours (the stylesheet breaks anywhere as a last
    resort)."""
    text = _e(name)
    for sep in _BREAKS:
        text = text.replace(sep, f"{sep}<wbr>")
    return text


def _heatmap(data: ReportData, links: Links) -> str:
    cols = [*data.categories, ALL]
    head = "".join(f'<th title="{_e(c)}">{_breakable(c)}</th>' for c in cols)
    body = []
    for label, h in data.harnesses:
        cells = "".join(_cell_td(links, data.heat.get((h, c)), f"{label} / {c}") for c in cols)
        body.append(f'<tr data-harness="{_e(label)}"><td class="name">{_e(label)}</td>{cells}</tr>')
    return (
        '<div class="scroll"><table id="heatmap-table"><tr><th class="name">harness</th>'
        f"{head}</tr>{''.join(body)}</table></div>"
    )


def _rescue(data: ReportData, links: Links) -> str:
    if data.base is None:
        return '<p class="note">No base harness: no lineage recorded; pass --base.</p>'
    if (data.base.hash, ALL) not in data.heat:
        return f'<p class="note">{_e(data.base.name)} has no rollouts in this selection.</p>'
    if not data.rescue_tasks:
        return f'<p class="note">{_e(data.base.name)} failed no task on every rollout.</p>'
    cols = [(label, h) for label, h in data.harnesses]
    head = "".join(f'<th data-harness="{_e(label)}">{_e(label)}</th>' for label, _ in cols)
    rows = []
    rescued: dict[str, int] = {h: 0 for _, h in cols}
    for task, category, _base_cell in data.rescue_tasks:
        tds = []
        for label, h in cols:
            cell = data.rescue.get((task, h))
            if cell is not None and cell.successes and h != data.base.hash:
                rescued[h] += 1
            tds.append(_cell_td(links, cell, f"{label} on {task}"))
        rows.append(
            f'<tr><td class="name mono">{_e(task)}</td><td class="name">{_e(category)}</td>'
            f"{''.join(tds)}</tr>"
        )
    totals = "".join(f"<th>{'base' if h == data.base.hash else rescued[h]}</th>" for _, h in cols)
    return (
        f'<p class="note">Tasks on which every rollout of <b>{_e(data.base.name)}</b> failed '
        f"({len(data.rescue_tasks)}); cell = successes/attempts of each harness on the task. "
        "Last row: all-fail tasks rescued (at least one success).</p>"
        '<div class="scroll"><table id="rescue-table"><tr><th class="name">task</th>'
        f'<th class="name">category</th>{head}</tr>{"".join(rows)}'
        f'<tr><th class="name" colspan="2">all-fail tasks rescued</th>{totals}</tr></table></div>'
    )


def _costs(data: ReportData, links: Links) -> str:
    rows = []
    for label, h in data.harnesses:
        c = data.costs.get(h)
        if c is None:
            continue
        per = (c.prompt_tokens + c.completion_tokens) / max(1, c.rollouts)
        rows.append(
            f'<tr><td class="name">{_e(label)}</td><td>{c.rollouts}</td><td>{c.model_calls}</td>'
            f"<td>{c.prompt_tokens}</td><td>{c.completion_tokens}</td><td>{per:.0f}</td>"
            f"<td>${c.cost_usd:.4f}</td></tr>"
        )
    harness_table = (
        '<table id="cost-harness"><tr><th class="name">harness</th><th>rollouts</th>'
        "<th>model calls</th><th>prompt tok</th><th>completion tok</th><th>tok/rollout</th>"
        f"<th>eval cost</th></tr>{''.join(rows)}</table>"
    )
    erows = []
    for e in data.edits:
        metrics = json.loads(e.metrics_json or "{}")
        cell = data.edit_cells.get(e.id)
        judged = (
            _cell_td(links, cell, f"edit {e.id} ({e.direction}): child on batch+control")
            if cell is not None
            else '<td class="cell empty">&ndash;</td>'
        )
        erows.append(
            f'<tr><td class="name mono">{_e(e.id)}</td><td class="name">{_e(e.parent_name)}</td>'
            f'<td class="name">{_e(e.direction)}</td><td>r{e.round}.{e.attempt}</td>'
            f'<td class="name">{_e(e.status)}</td><td class="name">{_e(e.editor)}</td>'
            f"<td>{e.prompt_tokens}</td><td>{e.completion_tokens}</td><td>${e.cost_usd:.4f}</td>"
            f"<td>{metrics.get('child_eval_tokens', '')}</td>{judged}</tr>"
        )
    edit_table = (
        '<table id="cost-edit"><tr><th class="name">edit</th><th class="name">parent</th>'
        '<th class="name">direction</th><th>round</th><th class="name">status</th>'
        '<th class="name">editor</th><th>editor prompt tok</th><th>editor completion tok</th>'
        "<th>editor cost</th><th>child eval tok</th><th>child judged</th></tr>"
        f"{''.join(erows)}</table>"
    )
    return (
        f"<h3>Per harness (evaluation, this selection)</h3>{harness_table}"
        f'<h3>Per edit (editor)</h3><div class="scroll">{edit_table}</div>'
    )


def _pairs(data: ReportData, links: Links, labels: dict[str, str]) -> str:
    rows = []
    for e in data.edits:
        for p in data.edit_pairs.get(e.id, []):
            parent = labels.get(e.parent_hash, e.parent_name)
            child = labels.get(e.child_hash or "", e.child_name or "child")
            key = links.add_pair(
                p, f"edit {e.id} ({e.direction}): {parent} | {child}, {p.task_id} seed {p.seed}"
            )
            cls = "ok" if p.change == "rescue" else "bad"
            rows.append(
                f'<tr data-edit="{_e(e.id)}"><td class="name mono">{_e(e.id)}</td>'
                f'<td class="name">{_e(e.direction)}</td><td class="name">{_e(e.status)}</td>'
                f'<td class="name mono">{_e(p.task_id)}</td><td>{p.seed}</td>'
                f'<td class="name">{p.where}</td><td class="name">{_e(p.parent.outcome)}</td>'
                f'<td class="name">{_e(p.child.outcome)}</td>'
                f'<td class="name"><span class="{cls}">{p.change}</span></td>'
                f'<td><a href="#cell={key}" data-cell="{key}">side by side</a></td></tr>'
            )
    if not rows:
        return '<p class="note">No judged pair changed outcome (or no edit was judged).</p>'
    return (
        '<p class="note">The (task, seed) pairs each edit was judged on whose outcome changed '
        "from parent to child: batch rescues, and control regressions (what the edit's reward "
        "and sign test count). Open a pair to read both trajectories side by side.</p>"
        '<div class="scroll"><table id="pairs-table"><tr><th class="name">edit</th>'
        '<th class="name">direction</th><th class="name">status</th><th class="name">task</th>'
        '<th>seed</th><th class="name">judged in</th><th class="name">parent</th>'
        '<th class="name">child</th><th class="name">change</th><th></th></tr>'
        f"{''.join(rows)}</table></div>"
    )


def render(data: ReportData, embed: Any, *, per_cell: int, max_embedded: int) -> str:
    """The page; ``embed(rows)`` returns compact trajectories by rollout id."""
    links = Links(per_cell)
    labels = {h: label for label, h in data.harnesses}
    for n in walk(data.roots):
        labels.setdefault(n.hash, n.name)
    sections = [
        ("lineage", "Evolution lineage", _lineage(data, links, labels)),
        ("heatmap", "Profile heatmap: success by task category", _heatmap(data, links)),
        ("rescue", "Rescue matrix", _rescue(data, links)),
        ("pairs", "Edit pairs: parent and child, same task and seed", _pairs(data, links, labels)),
        ("cost", "Cost", _costs(data, links)),
    ]
    unique = list({r.id: r for r in links.rows}.values())[:max_embedded]
    payload = {"cells": links.cells, "rollouts": embed(unique)}
    blob = script_json(payload)
    sel = data.selection
    base_name = data.base.name if data.base else "-"
    others = "; ".join(
        f"{s.policy_id} {s.suite} {s.split} ({n})" for s, n in data.available if s != sel
    )
    body = "".join(f'<section id="{i}"><h2>{t}</h2>{html}</section>' for i, t, html in sections)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>harnessctl report: {_e(sel.suite)} {_e(sel.split)}</title><style>{CSS}</style></head>
<body><main>
<h1>harnessctl report</h1>
<div class="meta">policy <b>{_e(sel.policy_id)}</b> &middot; suite <b>{_e(sel.suite)}</b>
 &middot; split <b>{_e(sel.split)}</b> &middot; base <b>{_e(base_name)}</b>
 &middot; {len(data.harnesses)} harnesses &middot; {len(data.edits)} edits</div>
<div class="note">Other selections in the store (pick with --policy/--suite/--split):
 {_e(others or "none")}. {legend(data.edits)}
 Click any cell or rate to see the rollouts behind it below.</div>
{body}
<section id="trajectories"><h2>Trajectories</h2>
<div class="note">At most {per_cell} rollouts per cell (failures first) and {max_embedded}
 rollouts in the whole page are embedded ({len(payload["rollouts"])} here), each text clipped;
 <code>harnessctl show ID</code> prints a full trajectory.</div>
<div id="traj-title">Click a cell above.</div><div id="traj-list"></div></section>
</main>
<script type="application/json" id="report-data">{blob}</script>
<script>{JS}</script>
</body></html>
"""
