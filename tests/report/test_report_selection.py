"""Which rollouts the report stands on: rollouts are cache entries, so a harness evaluated on a
split's tasks under another split label (its rollouts served from that cache) still has its
heatmap row, with exactly those rollouts."""

import json
import os
import subprocess
import sys

import pytest

from harnessctl.workspace import init_workspace, load_workspace


def cli(ws, *args):
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", *map(str, args)],
        cwd=ws, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_a_harness_whose_rollouts_carry_another_splits_label_has_its_row(tmp_path):
    ws = tmp_path / "ws"
    init_workspace(ws)
    suite = load_workspace(ws).load_suite(None)
    train = [t.id for t in suite.tasks("train").tasks]
    test = [t.id for t in suite.tasks("test").tasks]
    base_tasks = [a for t in train[:3] for a in ("--task", t)]
    cli(ws, "eval", "dbbench-base", "--split", "train", "--rollouts", "1", *base_tasks)
    # dbbench-fc evaluated under "dev" on one train task and one test task
    cli(ws, "eval", "dbbench-fc", "--split", "dev", "--rollouts", "1",
        "--task", train[0], "--task", test[0])  # fmt: skip
    out = ws / "report.html"
    proc = cli(ws, "report", "--split", "train", "--out", out, "--json")
    summary = json.loads(proc.stdout)
    assert summary["split"] == "train"
    assert set(summary["harnesses"]) == {"dbbench-base", "dbbench-fc"}
    html = out.read_text(encoding="utf-8")
    blob = html.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    cells = json.loads(blob)["cells"].values()
    fc = next(c for c in cells if c["title"] == "dbbench-fc / all")
    assert fc["total"] == 1  # the train task only: the test task is not in this split
    base = next(c for c in cells if c["title"] == "dbbench-base / all")
    assert base["total"] == 3
    # the dev split (every task) counts all five rollouts, whatever their label
    proc = cli(ws, "report", "--split", "dev", "--out", ws / "dev.html", "--json")
    dev_html = (ws / "dev.html").read_text(encoding="utf-8")
    blob = dev_html.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    totals = {c["title"]: c["total"] for c in json.loads(blob)["cells"].values()}
    assert totals["dbbench-base / all"] == 3 and totals["dbbench-fc / all"] == 2
