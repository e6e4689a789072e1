"""os_interaction's loader: AgentBench's layout as it is, and broken records named by file,
record and field (no Docker needed)."""

from __future__ import annotations

import json
from pathlib import Path

from harnessctl.envs import get_environment
from harnessctl.envs.os_interaction import OSEnvironment, public_task
from harnessctl.envs.os_interaction.tasks import load_tasks, scripts_dir
from tests.helpers import ROOT

DEV = ROOT / "examples" / "os_interaction"


def test_the_shipped_dev_split_loads_whole_with_scripts_read():
    tasks = load_tasks(DEV)
    assert tasks.problems == []
    assert len(tasks.tasks) == 26
    by_id = tasks.by_id()
    calc = by_id["dev.3"].record
    assert calc["check"][0][0] == "bash" and "calc" in calc["check"][0][1]  # check/0.sh read
    assert calc["example"][1].startswith("echo '#!/bin/bash")
    hidden = by_id["dev.6"].record
    assert hidden["check"][0] is None and hidden["check"][1][0] == "python"
    assert by_id["dev.25"].record["init"][0][1].startswith("#!/bin/bash")  # init/stock-log.sh
    assert by_id["dev.21"].record["init"] == [["bash", by_id["dev.21"].record["init"][0][1]]]
    assert by_id["dev.0"].record["start"][1].startswith("python3 -c")
    # AgentBench reads a `create` that is not an object as "default image, no init"
    assert by_id["dev.10"].record["init"] == [] and by_id["dev.10"].record["image"] == "default"
    assert by_id["dev.0"].category == "file" and by_id["dev.24"].category == "permission"


def test_standard_split_layout_finds_scripts_by_folder(tmp_path: Path):
    root = tmp_path / "os"
    (root / "data" / "1").mkdir(parents=True)
    (root / "scripts" / "1" / "check").mkdir(parents=True)
    (root / "scripts" / "1" / "check" / "ok.sh").write_text("exit 0\n")
    record = {
        "description": "d",
        "evaluation": {"check": [{"file": "check/ok.sh"}]},
        "labels": ["x"],
    }
    (root / "data" / "1" / "find.json").write_text(json.dumps([record, record]))
    assert scripts_dir(root / "data" / "1" / "find.json") == (root / "scripts" / "1").resolve()
    assert scripts_dir(root / "data" / "dev.json") == (root / "scripts" / "dev").resolve()
    tasks = get_environment("os_interaction").load_tasks(root)
    assert [t.id for t in tasks.tasks] == ["1.find.0", "1.find.1"]
    assert tasks.tasks[0].record["check"] == [["bash", "exit 0\n"]]


def test_broken_records_are_problems_naming_file_record_and_field(tmp_path: Path):
    root = tmp_path / "os"
    (root / "data").mkdir(parents=True)
    (root / "scripts" / "dev").mkdir(parents=True)
    good = {"description": "ok", "evaluation": {"match": "1"}}
    records = [
        good,
        {"evaluation": {"match": "1"}},
        {"description": "d", "evaluation": {"check": [{"file": "check/missing.py"}]}},
        {"description": "d", "evaluation": {"check": [None, {"code": "exit 0"}]}},
        {"description": "d", "evaluation": {}},
        {"description": "d", "evaluation": {"check": {"code": "x", "language": "ruby"}}},
        {"description": "d", "evaluation": {"check": {"file": "../../etc/passwd"}}},
    ]
    file = root / "data" / "dev.json"
    file.write_text(json.dumps(records))
    tasks = load_tasks(root)
    assert [t.id for t in tasks.tasks] == ["dev.0"]
    messages = [p.message for p in tasks.problems]
    assert all(p.file == str(file) for p in tasks.problems)
    assert messages[0] == "[1].description: missing or not a non-empty string"
    assert messages[1].startswith("[2].evaluation.check[0].file: cannot read")
    assert messages[2].startswith("[3].evaluation.example: missing")
    assert messages[3] == "[4].evaluation: needs match or check"
    assert messages[4].startswith("[5].evaluation.check.language: 'ruby'")
    assert "leaves the scripts folder" in messages[5]
    (root / "data" / "bad.json").write_text("{not json")
    problems = load_tasks(root).problems
    assert any(p.file.endswith("bad.json") and "not JSON" in p.message for p in problems)


def test_the_sandbox_sees_only_the_description(tmp_path: Path):
    env = OSEnvironment()
    task = load_tasks(DEV).by_id()["dev.6"]
    env.prepare(task, tmp_path)
    written = json.loads((tmp_path / "task.json").read_text())
    assert written == public_task(task)
    assert set(written) == {"task_id", "env", "instruction"}
    text = (tmp_path / "task.json").read_text()
    assert "integer-match" not in text and "grep" not in text


def test_an_environments_own_replay_policy_wins_over_the_generic_one():
    from harnessctl.envs.os_interaction.replay import ReplayOS, last_output
    from harnessctl.policies import get_offline_policy
    from harnessctl.policies.replay import ReplayPolicy

    assert isinstance(get_offline_policy("replay/os_interaction"), ReplayOS)
    assert isinstance(get_offline_policy("replay/dbbench"), ReplayPolicy)
    shown = [{"role": "user", "content": "The output of the OS:\n\n 8 \n"}]
    assert last_output(shown) == "8"


def test_the_replay_answers_where_a_check_reads_the_answer():
    """4.Q47.0's first check reads the answer (the path the file was moved from), though
    no check is ``null``: the replay answers with the example's output, not ``finish``."""
    standard = load_tasks(ROOT / "examples" / "os_interaction" / "standard").by_id()
    env = OSEnvironment()
    final = env.replay(standard["4.Q47.0"])[-1]
    assert final.get("answer_from_output") and "Act: answer({output})" in final["text"]
    assert env.replay(standard["6.new.3"])[-1]["text"].endswith("Act: finish")
    assert env.oracle(standard["4.Q47.0"])["answers"]


def test_the_shipped_standard_split_loads_whole():
    """AgentBench's standard split (data/1..7, commit ac57ad0): 144 tasks, ids as the issues
    name them, every script file read."""
    tasks = load_tasks(ROOT / "examples" / "os_interaction" / "standard")
    assert tasks.problems == [] and len(tasks.tasks) == 144
    by_id = tasks.by_id()
    assert {"2.environment.0", "4.Q30.5", "4.Q47.0", "4.N4.0", "4.Q09.0"} <= set(by_id)
    assert by_id["5.new.0"].record["check"][0][1].startswith("#!/bin/bash")  # checking/0.sh
    assert sum(t.id.startswith("7.bootstrap.") for t in tasks.tasks) == 88


def test_a_check_reads_the_answer_only_where_its_top_level_names_its_arguments():
    from harnessctl.envs.os_interaction.episode import _reads_arguments

    assert _reads_arguments("python", "from sys import argv\nassert argv[1] == 'x'")
    assert _reads_arguments("bash", 'test "$1" = yes')
    assert _reads_arguments("bash", '[ "${1}" = yes ] && [ $# -gt 0 ]')
    assert not _reads_arguments("python", "print(1)")
    # awk's fields in single quotes and a function's own arguments are not the script's
    assert not _reads_arguments("bash", "ls -l /usr/bin/find | awk '{if ($1~/s/) exit 1}'")
    assert not _reads_arguments("bash", 'count() {\n  local dir=$1\n  echo "$dir"\n}\ncount /x')
    dev = load_tasks(DEV).by_id()
    assert not OSEnvironment().oracle(dev["dev.3"])["answers"]  # calc: its checks run calc


def test_a_snapshot_is_undone_only_where_the_example_may_write():
    from harnessctl.envs.os_interaction.episode import _may_write

    assert not _may_write("bash", "find /home -type f 2>/dev/null | wc -l")
    assert not _may_write("bash", "ls -a /home 2>&1 | grep '^\\.' | wc -l")
    assert _may_write("bash", "mkdir -p ~/a/{b,c} && find ~/a -type d | wc -l")
    assert _may_write("bash", "sort x | uniq > bob_sold.txt; rm bob_sold.txt")
    assert _may_write("python", "print(1)")
