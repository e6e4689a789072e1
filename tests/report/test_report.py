"""`harnessctl report` on a workspace with evolved siblings: the page's structure and numbers
against the store, no external resources, and a render in headless Chromium (screenshot kept
as test output; copied to test-output/report.png when HARNESSCTL_TEST_OUTPUT is set)."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harnessctl.workspace import init_workspace, load_workspace
from tests.helpers import ROOT
from tests.helpers.ci import unavailable

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")

DIRECTIONS = ["execution-recovery", "context-construction", "observation-shaping"]
CHROMIUM = "/usr/bin/chromium"
REPO = ROOT


def cli(ws, *args, timeout=600):
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    return subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", *args],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def record_rejected_edit(ws):
    """A rejected proposal as evolve records one: the report must list it under its parent."""
    from harnessctl.store import EditRow

    store = load_workspace(ws).open_store()
    first = store.edits()[0]
    store.record_edit(
        EditRow(
            edit_key="test-rejected",
            evolve_id=first.evolve_id,
            parent_hash=first.parent_hash,
            parent_name=first.parent_name,
            direction="termination",
            round=1,
            attempt=0,
            editor="rules",
            prompt="p",
            response="r",
            status="rejected",
            reason="does_not_apply",
            detail="SEARCH block 1 not found in harness.py",
            created_at=time.time(),
        )
    )
    store.close()


@pytest.fixture(scope="module")
def evolved(dbbench_world, tmp_path_factory):
    ws = tmp_path_factory.mktemp("report") / "ws"
    init_workspace(ws)
    args = ["evolve", "dbbench-base", "--split", "train", "--rounds", "1", "--rollouts", "2"]
    with dbbench_world.read_through():  # the base's rollouts are the world's
        proc = cli(ws, *args, "--directions", ",".join(DIRECTIONS), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{") :])
    record_rejected_edit(ws)
    out = ws / "out" / "report.html"
    proc = cli(ws, "report", "--out", str(out), "--per-cell", "3", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ws, result, out, json.loads(proc.stdout)


class Ids(HTMLParser):
    """Text under each element with an id, and every src/href value."""

    def __init__(self):
        super().__init__()
        self.stack, self.text, self.refs = [], {}, []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.refs += [v for k, v in attrs.items() if k in ("src", "href") and v]
        if tag not in ("br", "meta", "wbr", "link", "img", "input"):
            self.stack.append(attrs.get("id"))
            if attrs.get("id"):
                self.text.setdefault(attrs["id"], "")

    def handle_endtag(self, tag):
        if tag not in ("br", "meta", "wbr", "link", "img", "input") and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        for i in self.stack:
            if i:
                self.text[i] += data


def parse(html):
    p = Ids()
    p.feed(html)
    return p


def test_report_shows_lineage_heatmap_rescues_and_costs(evolved):
    ws, result, out, summary = evolved
    html = out.read_text(encoding="utf-8")
    page = parse(html)
    names = ["dbbench-base", *(v["name"] for v in result["best"].values())]
    # base and at least two accepted siblings (which directions pass the sign test depends
    # on the seeded failure batch, and so on the evolve id)
    assert len(names) >= 3 and summary["harnesses"] == names  # lineage order
    assert (summary["split"], summary["policy"]) == ("train", "sim/dbbench")
    for name in names:
        assert name in page.text["lineage-tree"]
        assert name in page.text["heatmap-table"]
        assert name in page.text["rescue-table"]
        assert name in page.text["cost-harness"]
    for direction in DIRECTIONS:  # each edge carries its direction and reward
        edit = next(e for e in result["edits"] if e["direction"] == direction)
        if edit["status"] == "accepted":
            assert f"{direction} · reward {edit['reward']:+.3f}" in page.text["lineage-tree"]
        else:  # evaluated, not accepted: on its parent, with its p-value
            assert re.search(
                rf"{edit['status']}\s+{direction} r1\.0: p=", page.text["lineage-tree"]
            )
    # the legend describes the gate that ran (issue #54), not an earlier one
    assert "sequential gate: parent and child on fresh seeds" in html
    assert "split guard: committed only if" in html and "same-batch reward" not in html
    # The rejected proposal hangs on its parent with its reason.
    assert re.search(r"rejected\s+termination r1\.0: does_not_apply", page.text["lineage-tree"])
    # No resource from anywhere else: every reference stays in the page.
    assert all(ref.startswith("#") for ref in page.refs), page.refs
    assert not re.search(r"https?://|url\(|@import", html.split('id="report-data"')[0])


def test_report_cells_match_the_store_and_embed_capped_trajectories(evolved):
    ws, result, out, summary = evolved
    html = out.read_text(encoding="utf-8")
    blob = re.search(r'id="report-data">(.*?)</script>', html, re.S).group(1)
    data = json.loads(blob)
    store = load_workspace(ws).open_store()
    base_hash = store.edits()[0].parent_hash
    # the base as its run reports it (run identity): the evolve's base evaluation, not every
    # stored rollout of the base (its judgements' extra seeds are runs under the evolve)
    (run,) = [
        r
        for r in store.runs()
        if r.command == "evolve" and r.harness_hash == base_hash and not r.parent_id
    ]
    base_rows = store.members(run.id)
    assert len(base_rows) < len(store.rollouts(harness_hash=base_hash, split="train"))
    ok = sum(r.success for r in base_rows)
    cell = next(c for c in data["cells"].values() if c["title"] == "dbbench-base / all")
    assert cell["total"] == len(base_rows) and cell["shown"] == 3
    assert f"{ok}/{len(base_rows)}" in parse(html).text["heatmap-table"]
    # Rescue rows are exactly the tasks on which every base rollout failed.
    by_task = {}
    for r in base_rows:
        by_task.setdefault(r.task_id, []).append(r.success)
    all_failed = sorted(t for t, s in by_task.items() if not any(s))
    rescue_table = html.split('id="rescue-table"')[1].split("</table>")[0]
    shown = re.findall(r'<td class="name mono">(dev-\d+)</td>', rescue_table)
    assert sorted(shown) == all_failed
    assert summary["embedded"] == len(data["rollouts"])
    for c in data["cells"].values():
        assert len(c["ids"]) <= 3 and set(c["ids"]) <= set(data["rollouts"])
    sample = data["rollouts"][cell["ids"][0]]
    assert not sample["success"] and sample["messages"] and sample["turns"]  # failures first
    # the base's own protocol (AgentBench's): its instructions open the conversation as a user turn
    first = sample["messages"][0]
    assert first["role"] == "user" and "operate a MySQL database" in first["content"]


def test_report_refuses_an_unknown_selection(evolved):
    ws, _, _, _ = evolved
    proc = cli(ws, "report", "--out", str(ws / "x.html"), "--split", "nosuch", timeout=120)
    assert proc.returncode == 2
    assert "no rollouts for nosuch" in proc.stderr
    assert "sim/dbbench dbbench-dev train" in proc.stderr
    assert not (ws / "x.html").exists()


def chromium(tmp_path, *args):
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.decode("utf-8")


def test_report_renders_in_headless_chromium(evolved, tmp_path):
    if not Path(CHROMIUM).exists():
        unavailable(
            "the report render test",
            f"{CHROMIUM} is not installed (apt-get install chromium)",
        )
    ws, result, out, summary = evolved
    url = out.resolve().as_uri()
    shot = tmp_path / "report.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,2000", url)
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 50_000  # a page, not a blank
    if os.environ.get("HARNESSCTL_TEST_OUTPUT"):
        (REPO / "test-output").mkdir(exist_ok=True)
        shutil.copyfile(shot, REPO / "test-output" / "report.png")
    dom = parse(chromium(tmp_path, "--dump-dom", url))
    for name in summary["harnesses"]:
        for section in ("lineage-tree", "heatmap-table", "rescue-table"):
            assert name in dom.text[section], (name, section)
    # The inline script runs: a #cell= link renders that cell's trajectories.
    opened = chromium(tmp_path, "--dump-dom", f"{url}#cell=c0")
    assert 'data-shown="c0"' in opened and opened.count('class="rollout"') >= 1
    assert "dbbench-base: all rollouts" in opened


def test_every_script_string_literal_closes_on_its_line():
    """A Python ``\\n`` inside the script's JS strings is a real newline there: an unterminated
    literal, a syntax error that silently disables the whole script (cells stop opening)."""
    import re

    from harnessctl.report.assets import JS

    for number, line in enumerate(JS.splitlines(), 1):
        code = re.sub(r"/\^.*?\$/", "", line.split("//")[0])  # no comments, no regex literal
        quotes = len(re.findall(r"(?<!\\)'", code))
        assert quotes % 2 == 0, (number, line)


LONG_CATEGORIES = [  # ALFWorld's task types, the longest category names shipped
    "look_at_obj_in_light",
    "pick_and_place_simple",
    "pick_clean_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_two_obj_and_place",
    "a-hyphenated-category-name-as-long-as-those",
]
MEASURE = """<script>
window.addEventListener('load', () => {
  const heads = [...document.querySelectorAll('#heatmap-table tr:first-child th')];
  const bad = [];
  heads.forEach((th, i) => {
    if (th.scrollWidth > th.clientWidth + 1) bad.push('overflow:' + th.title);
    const next = heads[i + 1];
    if (next && th.getBoundingClientRect().right > next.getBoundingClientRect().left + 1)
      bad.push('overlap:' + th.title);
    if (th.getBoundingClientRect().width > 140) bad.push('wide:' + th.title);
  });
  document.body.setAttribute('data-layout', bad.length ? bad.join('|') : 'ok');
});
</script>"""


def test_long_category_names_wrap_inside_their_columns(tmp_path):
    """Laid out by a real browser: every heatmap header stays inside its own column."""
    if not Path(CHROMIUM).exists():
        unavailable("the heatmap layout test", f"{CHROMIUM} is not installed")
    from harnessctl.report.data import ALL, Cell, ReportData, Selection
    from harnessctl.report.html import render
    from harnessctl.store import RolloutRow

    heat = {}
    for i, category in enumerate([*LONG_CATEGORIES, ALL]):
        cell = Cell()
        for k in range(2):
            cell.add(
                RolloutRow(
                    cache_key=f"{i}-{k}",
                    run_id="r",
                    harness_hash="h1",
                    task_id=f"t{i}",
                    category=category,
                    policy_id="p",
                    outcome="success" if k else "wrong_answer",
                    success=bool(k),
                )
            )
        heat[("h1", category)] = cell
    data = ReportData(
        selection=Selection("p", "s", "dev"), available=[], roots=[], base=None,
        harnesses=[("some-harness", "h1")], categories=LONG_CATEGORIES, heat=heat,
        rescue_tasks=[], rescue={}, costs={}, edits=[], edit_cells={},
    )  # fmt: skip
    page = render(data, lambda rows: {}, per_cell=1, max_embedded=10)
    head = page.split('id="heatmap-table"')[1].split("</tr>")[0]
    assert "pick_<wbr>clean_<wbr>then_<wbr>place_<wbr>in_<wbr>recep" in head
    assert 'title="pick_clean_then_place_in_recep"' in head  # the full name on hover
    out = tmp_path / "page.html"
    out.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = chromium(tmp_path, "--window-size=1400,900", "--dump-dom", out.resolve().as_uri())
    layout = re.search(r'data-layout="([^"]*)"', dom)
    assert layout and layout.group(1) == "ok", layout and layout.group(1)


def test_report_pairs_parent_and_child_on_each_changed_judged_pair(evolved, tmp_path):
    ws, result, out, summary = evolved
    html = out.read_text(encoding="utf-8")
    store = load_workspace(ws).open_store()
    expected = set()
    for e in store.edits():
        if not e.child_hash:
            continue
        m = json.loads(e.metrics_json)

        def outcome(h, m=m):
            rows = store.rollouts(harness_hash=h, policy_id=m["policy_id"], split=m["split"])
            return {(r.task_id, r.seed): r.success for r in rows}

        parent, child = outcome(e.parent_hash), outcome(e.child_hash)
        for t, s in m["batch"] + m["control"]:
            if parent[(t, s)] != child[(t, s)]:
                expected.add((e.id, t, s, "rescue" if child[(t, s)] else "regression"))
    table = html.split('id="pairs-table"')[1].split("</table>")[0]
    shown = set()
    for row in re.findall(r"<tr data-edit.*?</tr>", table):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        change = re.sub(r"<[^>]+>", "", cells[8])
        shown.add((cells[0], cells[3], int(cells[4]), change))
    assert shown == expected and any(c == "rescue" for *_, c in expected)
    # each pair opens parent and child side by side, in a real browser
    key = re.search(r'data-cell="(c\d+)">side by side', table).group(1)
    blob = re.search(r'id="report-data">(.*?)</script>', html, re.S).group(1)
    cell = json.loads(blob)["cells"][key]
    assert cell["pair"] and cell["shown"] == 2
    if not Path(CHROMIUM).exists():
        unavailable("the report render test", f"{CHROMIUM} is not installed")
    dom = chromium(tmp_path, "--dump-dom", f"{out.resolve().as_uri()}#cell={key}")
    assert re.search(r'<div id="traj-list"[^>]*\bclass="pair"', dom)
    listing = dom.split('id="traj-list"')[1]
    assert listing.count('class="rollout"') == 2
    names = re.findall(r'<div class="mono">\w{12}  (\S+)  task', listing)
    assert len(names) == 2 and names[0] != names[1]  # parent first, then its child
