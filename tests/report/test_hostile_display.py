"""Harness- and model-written text on its way to a terminal and into the HTML report (issue
#24, findings 10 and 11): control sequences never reach the terminal (one filter,
``cli.render.terminal_safe``, behind every printer), and the report's JSON data block stays
inert whatever a trajectory holds (checked in headless Chromium: the viewer still works).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessctl.cli import app
from harnessctl.cli.render import terminal_safe
from harnessctl.report.html import script_json
from harnessctl.store import AttemptRow
from harnessctl.workspace import init_workspace, load_workspace
from tests.helpers import ROOT
from tests.helpers.ci import unavailable
from tests.helpers.stores import make_rollout

runner = CliRunner()
CHROMIUM = "/usr/bin/chromium"

# What the review planted, each with a word that must still show as text.
ATTACKS = {
    "title": "\x1b]0;TITLE-owned\x07",  # OSC 0: the window title
    "clipboard": "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x1b\\",  # OSC 52: a clipboard write
    "clear": "\x1b[2J\x1b[H",  # CSI: clear the screen, cursor home
    "fake": "\x1b[1;32mall passed\x1b[0m",  # fake coloured verdict
    "c1": "\x9b31mred\x9b0m\x9d0;c1title\x9c",  # the 8-bit forms
    "rewrite": "FAILED\rPASSED",  # a carriage return rewrites the line
    "bidi": "\u202eevil\u202c",
    "bell": "ding\x07",
}
HOSTILE = "start " + " ".join(ATTACKS.values()) + " end"
SHOWN = ["start", "all passed", "red", "FAILED", "PASSED", "evil", "ding", "end"]
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_terminal_safe(out: str) -> None:
    assert not CONTROL.search(out), repr(CONTROL.search(out))


def assert_sequences_gone(line: str) -> None:
    """A whole sequence goes, not only its introducer (a ``repr`` elsewhere shows them as
    inert ``\\x1b`` text, which is fine)."""
    for gone in ("TITLE-owned", "Y3VybCBldmlsIHwgc2g=", "c1title", "[2J", "31m"):
        assert gone not in line, line


def test_the_filter_removes_every_sequence_and_keeps_the_text():
    for name, attack in ATTACKS.items():
        assert not CONTROL.search(terminal_safe(attack)), name
    out = terminal_safe(HOSTILE)
    assert_terminal_safe(out)
    assert_sequences_gone(out)
    for word in SHOWN:
        assert word in out
    assert terminal_safe("tab\there\nnext [b]x[/b]") == "tab\there\nnext [b]x[/b]"
    assert terminal_safe("\x1b]0;never terminated") == "0;never terminated"  # inert text


def test_the_filter_is_linear_on_hostile_input():
    for bad in ("\x9d" * 400_000, "\x1b]" + "a" * 400_000, ("\x1b[" + "1" * 999) * 400):
        started = time.perf_counter()
        terminal_safe(bad)
        assert time.perf_counter() - started < 5


def hostile_trajectory(rollout_id: str) -> dict:
    return {
        "format_version": 1,
        "rollout_id": rollout_id,
        "task_id": f"t-{rollout_id}",
        "seed": 0,
        "harness": {"name": "dbbench-base", "hash": "h"},
        "policy": {"model": "sim/dbbench", "params": {}},
        "outcome": "wrong_answer",
        "steps": [{"index": 0, "kind": "reset", "observation": "obs " + HOSTILE}],
        "calls": [
            {
                "index": 0,
                "model": "sim/dbbench",
                "status": "ok",
                "messages": [
                    {"role": "system", "content": "system " + HOSTILE},
                    {"role": "user", "content": "user " + HOSTILE},
                ],
                "reply": "reply " + HOSTILE,
                "tool_calls": [
                    {"id": "id" + HOSTILE, "function": {"name": "sql", "arguments": HOSTILE}}
                ],
            }
        ],
        "events": [{"event": "turn", "kind": "sql", "feedback": "feedback " + HOSTILE}],
        "result": {"status": "done", "answer": HOSTILE, "traceback": "Traceback " + HOSTILE},
        "score": {"success": False, "detail": {"why": HOSTILE}},
    }


@pytest.fixture
def hostile_store(workspace):
    store = load_workspace(workspace).open_store()
    row = make_rollout(
        "k1",
        outcome="wrong_answer",
        success=False,
        harness_name="dbbench-base",
        error="error " + HOSTILE,
        category="cat" + ATTACKS["title"],
        task_id="task" + ATTACKS["clear"],
    )
    stored = store.record_rollout(row, [], hostile_trajectory("r1"))
    store.record_attempt(AttemptRow(cache_key="k1", run_id="run1", error="infra " + HOSTILE))
    return stored


def test_show_prints_no_control_sequence(hostile_store):
    """Finding 10: ``show`` printed an OSC 0 title, an OSC 52 clipboard write, a clear
    screen and fake colours raw."""
    shown = runner.invoke(app, ["show", hostile_store.id])
    assert shown.exit_code == 0, shown.output
    assert_terminal_safe(shown.stdout)
    for where in ("system", "user", "reply", "feedback", "Traceback", "obs", "error"):
        line = next(x for x in shown.stdout.splitlines() if f"{where} start" in x)
        assert_sequences_gone(line)  # every field is shown, as text
    assert "all passed" in shown.stdout


def test_listings_print_no_control_sequence(hostile_store):
    for args in (["rollouts"], ["rollouts", "--attempts"]):
        listed = runner.invoke(app, args)
        assert listed.exit_code == 0, listed.output
        assert_terminal_safe(listed.stdout)
    assert "infra start" in runner.invoke(app, ["rollouts", "--attempts"]).stdout


def test_json_output_escapes_controls_and_keeps_the_data(hostile_store):
    """``--json`` is data: every control character escaped (the C1 ones too), the same
    strings when parsed."""
    shown = runner.invoke(app, ["show", hostile_store.id, "--json"])
    assert shown.exit_code == 0, shown.output
    assert_terminal_safe(shown.stdout)
    data = json.loads(shown.stdout)
    assert data["calls"][0]["reply"] == "reply " + HOSTILE
    listed = runner.invoke(app, ["rollouts", "--attempts", "--json"])
    assert_terminal_safe(listed.stdout)
    assert json.loads(listed.stdout)["attempts"][0]["error"] == "infra " + HOSTILE


def test_an_error_naming_hostile_text_prints_no_control_sequence(workspace):
    result = runner.invoke(app, ["eval", "evil" + ATTACKS["title"] + ATTACKS["clear"]])
    assert result.exit_code == 2, result.output
    assert_terminal_safe(result.output)
    assert "evil" in result.output


def test_every_printer_goes_through_the_one_filter():
    """No command module builds rich text or markup from untrusted text by itself: ``Text``,
    ``rich.markup.escape`` and ``print_json`` are reached only through cli/render.py, whose
    helpers apply :func:`terminal_safe`."""
    cli_dir = ROOT / "harnessctl" / "cli"
    offenders = []
    for path in sorted(cli_dir.glob("*.py")):
        if path.name in ("render.py", "safe_text.py"):  # the rendering layer itself
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in ("rich.text", "rich.markup"):
                offenders.append(f"{path.name}: imports from {node.module}")
            if isinstance(node, ast.Attribute) and node.attr == "print_json":
                offenders.append(f"{path.name}:{node.lineno}: calls print_json")
    assert offenders == []


# --- the HTML report ----------------------------------------------------------------------
# no "-->" after "<!--<script>": that would end the double-escaped state again
REPORT_HOSTILE = (
    "<!--<script> </script><img id=pwned src=x> <script>window.x=1</script> ]]> &amp; "
    "\u2028 </SCRIPT "
)


def test_the_data_block_has_no_markup_character_and_round_trips():
    payload = {"rollouts": {"r": {"text": REPORT_HOSTILE}}, "<key>": "&"}
    blob = script_json(payload)
    assert not set("<>&") & set(blob)
    assert json.loads(blob) == payload


def chromium(tmp_path: Path, *args: str) -> str:
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", *args],
        capture_output=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.decode("utf-8")


@pytest.mark.slow
def test_hostile_trajectory_text_leaves_the_report_viewer_working(tmp_path):
    """Finding 11: ``<!--<script>`` in a trajectory's text put the parser in its
    double-escaped script state, which swallowed the viewer's script: cells stopped
    opening. Here a harness's system prompt carries it (every rollout's first message)."""
    if not Path(CHROMIUM).exists():
        unavailable("the report's hostile-text test", f"{CHROMIUM} is not installed")
    ws = tmp_path / "ws"
    init_workspace(ws)
    harness = ws / "harnesses" / "hostile-report"
    shutil.copytree(ws / "harnesses" / "dbbench-base", harness)
    manifest = harness / "harness.yaml"
    manifest.write_text(manifest.read_text().replace("dbbench-base", "hostile-report"))
    prompt = harness / "prompts" / "big_prompt.md"
    prompt.write_text(REPORT_HOSTILE + "\n" + prompt.read_text())
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    for args in (
        ["eval", "hostile-report", "--split", "dev", "--task", "dev-000", "--rollouts", "1"],
        ["report", "--out", str(ws / "report.html"), "--base", "hostile-report"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "harnessctl.cli", *args],
            cwd=ws, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
    page = (ws / "report.html").read_text(encoding="utf-8")
    blob = re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1)
    assert REPORT_HOSTILE.split("\u2028")[0] in json.dumps(json.loads(blob), ensure_ascii=False)
    url = (ws / "report.html").as_uri()
    opened = chromium(tmp_path, "--dump-dom", f"{url}#cell=c0")
    # the viewer ran: the cell's rollouts are rendered, the hostile text shown as text
    assert 'data-shown="c0"' in opened and opened.count('class="rollout"') >= 1
    assert "&lt;!--&lt;script&gt; &lt;/script&gt;&lt;img id=pwned" in opened
    assert 'id="pwned"' not in opened  # nothing of it became markup
    assert 'id="traj-title"' in opened and "hostile-report" in opened
