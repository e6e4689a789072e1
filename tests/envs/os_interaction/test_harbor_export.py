"""``harnessctl export-harbor`` on the os_interaction suite (docs/harbor.md).

Fast: every dev task's folder (its files, ``task.toml`` read with ``tomllib``), the command's
result and refusals, and the exported verifier's verdicts run on this host. Slow: three dev
tasks built with the Docker engine from the local task image and run as Harbor runs them
(the healthcheck's setup, ``solution/solve.sh``, then ``tests/test.sh``): the gold scores 1,
a wrong answer or a broken system 0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import tomllib
import uuid
from pathlib import Path

import jsonschema
import pytest

from harnessctl.cli import app
from harnessctl.envs.harbor import REWARD_FILE
from harnessctl.envs.os_interaction import OSEnvironment, harbor_judge
from harnessctl.envs.os_interaction.container import DEFAULT_IMAGE, labels
from harnessctl.harbor import ANSWER_FILE, ExportContext, export_suite, exporter_for, write_task
from harnessctl.suite import load_suite
from tests.helpers import EXAMPLE_SUITE, ROOT
from tests.helpers.ci import unavailable
from tests.helpers.cli import runner

SUITE = ROOT / "examples" / "os_interaction"
SCHEMA = ROOT / "tests" / "contracts" / "harbor" / "harbor-0.26.0-task-config.schema.json"
TASK_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")


def _resolve(node: dict, schema: dict) -> dict:
    """A schema node with ``$ref`` followed and ``anyOf [X, null]`` taken as ``X``."""
    while True:
        if "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        elif "anyOf" in node:
            node = next((n for n in node["anyOf"] if n.get("type") != "null"), {})
        else:
            return node


def ignored_keys(data: dict, node: dict, schema: dict, at: str = "") -> list[str]:
    """The keys of ``data`` Harbor's model does not name (it would drop them silently)."""
    props = _resolve(node, schema).get("properties", {})
    out = []
    for key, value in data.items():
        if key not in props:
            out.append(at + key)
        elif isinstance(value, dict) and key != "metadata":
            out += ignored_keys(value, props[key], schema, f"{at}{key}.")
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("harbor")
    suite = load_suite(SUITE)
    return out, export_suite(suite, "dev", out), suite


def test_every_dev_task_is_a_harbor_task_folder(exported) -> None:
    out, result, suite = exported
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    tasks = suite.tasks("dev").by_id()
    assert [t.id for t in result.tasks] == list(tasks) and len(tasks) == 26
    for entry in result.tasks:
        task, folder = tasks[entry.id], out / entry.folder
        record = task.record
        config = tomllib.loads((folder / "task.toml").read_text(encoding="utf-8"))
        validator.validate(config)  # Harbor 0.26's own model, as a JSON Schema
        assert not ignored_keys(config, schema, schema)
        assert config["schema_version"] == "1.4" and TASK_NAME.match(config["task"]["name"])
        assert config["task"]["name"] == f"os_interaction/{task.id}"
        meta = config["metadata"]["harnessctl"]
        assert meta["task_id"] == task.id and meta["content_hash"] == task.content_hash
        assert meta["verdict"] == ("match" if record["match"] else "check")
        assert config["agent"]["timeout_sec"] == 240.0
        assert config["verifier"]["timeout_sec"] >= 20.0
        environment = config["environment"]
        assert environment["network_mode"] == "no-network" and environment["workdir"] == "/"
        instruction = (folder / "instruction.md").read_text(encoding="utf-8")
        assert instruction.startswith(record["description"].strip()) and ANSWER_FILE in instruction
        dockerfile = (folder / "environment" / "Dockerfile").read_text(encoding="utf-8")
        assert f"FROM {DEFAULT_IMAGE}\n" in dockerfile
        has_setup = bool(record["init"]) or record["start"] is not None
        assert (folder / "environment" / "harnessctl-setup" / "setup.sh").is_file() == has_setup
        assert ("healthcheck" in environment) == has_setup
        for script in ("tests/test.sh", "solution/solve.sh"):
            path = folder / script
            assert path.read_text(encoding="utf-8").startswith("#!/bin/bash\n")
            assert os.access(path, os.X_OK), script
        judge = (folder / "tests" / "judge.py").read_text(encoding="utf-8")
        assert judge == Path(harbor_judge.__file__).read_text(encoding="utf-8")
        verdict = json.loads((folder / "tests" / "verdict.json").read_text(encoding="utf-8"))
        assert verdict["match"] == record["match"] and verdict["expected"] == "live"
        for check in verdict["check"] or []:
            assert check is None or (folder / "tests" / check["file"]).is_file()
        # the gold and the checks are in tests/ and solution/ only, which the agent never sees
        assert not any("check" in p.name for p in (folder / "environment").rglob("*"))
    manifest = json.loads((out / "harnessctl-export.json").read_text(encoding="utf-8"))
    assert manifest == result.model_dump(mode="json")
    assert not result.problems and all(not t.caveats for t in result.tasks)


def test_export_harbor_command_json_and_refusals(tmp_path) -> None:
    out = tmp_path / "out"
    args = ["export-harbor", str(SUITE), "--out", str(out), "--task", "dev.1", "--json"]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert (data["kind"], data["version"], data["split"]) == ("export-harbor", 1, "dev")
    assert [t["id"] for t in data["tasks"]] == ["dev.1"] and (out / "dev.1" / "task.toml").is_file()
    again = runner.invoke(app, args[:-1])  # a task folder is replaced
    assert again.exit_code == 0 and "1 task folder(s)" in again.stdout
    split = runner.invoke(app, ["export-harbor", str(SUITE), "--out", str(out), "--split", "x"])
    assert split.exit_code == 2 and "unknown split 'x'" in split.output
    other = runner.invoke(app, ["export-harbor", str(EXAMPLE_SUITE), "--out", str(out)])
    assert other.exit_code == 2 and "'dbbench' cannot be exported to Harbor" in other.output
    (out / "dev.2").mkdir()  # not a task folder: never replaced
    kept = runner.invoke(app, [*args[:4], "--task", "dev.2"])
    assert kept.exit_code == 2 and "not a task folder" in kept.output


def _judge(folder: Path, tmp: Path, answer: str | None, failed_setup: bool = False, **spec) -> int:
    """The exported verifier's reward, run on this host with its files under ``tmp``."""
    verdict_path = folder / "tests" / "verdict.json"
    verdict = json.loads(verdict_path.read_text(encoding="utf-8"))
    verdict["answer_file"] = str(tmp / "answer.txt")
    verdict["reward_file"] = str(tmp / "verifier" / "reward.txt")
    verdict["setup_failed_file"] = str(tmp / "setup-failed")
    verdict["remove_own_folder"] = False
    verdict.update(spec)
    verdict_path.write_text(json.dumps(verdict), encoding="utf-8")
    for path in (tmp / "answer.txt", tmp / "setup-failed"):
        path.unlink(missing_ok=True)
    if answer is not None:
        (tmp / "answer.txt").write_text(answer, encoding="utf-8")
    if failed_setup:
        (tmp / "setup-failed").write_text("init script 0 exited 1: no", encoding="utf-8")
    # in this process: tests/judge.py is this module's copy (the folder test checks it)
    assert harbor_judge.main(["judge.py", str(verdict_path)]) == 0
    return int((tmp / "verifier" / "reward.txt").read_text())


def test_the_verifier_judges_as_the_environment(tmp_path) -> None:
    env, out = OSEnvironment(), tmp_path / "out"
    context = ExportContext(suite="s", suite_id="s@0", split="dev", timeout_s=60)
    exporter = exporter_for("os_interaction")
    match = env.task_from_record(
        {"description": "Which?", "evaluation": {"match": "log"}}, task_id="m"
    )
    checked = env.task_from_record(
        {
            "description": "How many?",
            "evaluation": {
                "check": [None, {"language": "python", "code": INTEGER_MATCH}],
                "example": "echo 7",
            },
        },
        task_id="c",
    )
    folders = {
        t.id: write_task(exporter.export_harbor(env, t, context), out) for t in (match, checked)
    }
    assert _judge(folders["m"], tmp_path, " log \n") == 1  # stripped, as AgentBench's match
    assert _judge(folders["m"], tmp_path, "log.jsonl") == 0
    assert _judge(folders["m"], tmp_path, None) == 0
    assert _judge(folders["m"], tmp_path, "log", failed_setup=True) == 0  # a failed sample
    assert _judge(folders["c"], tmp_path, "7\n") == 1  # the example's output, live
    assert _judge(folders["c"], tmp_path, "8") == 0
    assert _judge(folders["c"], tmp_path, None) == 0  # "None" reaches the check, which fails
    detail = json.loads((tmp_path / "verifier" / "detail.json").read_text(encoding="utf-8"))
    assert detail["answer"] is None and detail["checks"] == [0, 1]
    (folders["c"] / "tests" / "checks" / "example.sh").write_text("sleep 30 | cat; echo 7")
    started = time.monotonic()
    assert _judge(folders["c"], tmp_path, "7", timeout_s=0.3) == 0  # past the checks' time
    assert time.monotonic() - started < 10  # the check and its children stopped
    detail = json.loads((tmp_path / "verifier" / "detail.json").read_text(encoding="utf-8"))
    assert detail["timeout"] == "checks ran past 0.3s"


def test_the_verifier_reads_answers_and_outputs_as_the_environment() -> None:
    from harnessctl.envs.os_interaction import _matches
    from harnessctl.envs.os_interaction.container import clean_text

    for rule in ({"answer": "log"}, {"answer": "a b"}, {"regex": r"^\d+$"}):
        for answer in (None, "log", " log\n", "log.jsonl", "a b", " a b ", "42", "4 2", ""):
            assert harbor_judge.matches(rule, answer) == _matches(rule, answer), (rule, answer)
    raw = "a\r\nb\x1b[31mc\td\x00\x7f\xff".encode("utf-8", "surrogateescape") + b"\xff"
    assert harbor_judge.clean_text(raw) == clean_text(raw)


INTEGER_MATCH = "from sys import argv\nif int(argv[1]) == int(argv[2]): exit(0)\nexit(1)"


# --- the exported folders in the Docker engine, as Harbor runs them ---------------------------


def _docker(*args: str, timeout: float = 180) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"docker {args[0]}: {done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def engine() -> None:
    if shutil.which("docker") is None:
        unavailable("the Harbor export's container tests", "no docker CLI")
    probe = subprocess.run(["docker", "image", "inspect", DEFAULT_IMAGE], capture_output=True)
    if probe.returncode != 0:
        unavailable(
            "the Harbor export's container tests",
            f"no Docker engine or no {DEFAULT_IMAGE} (scripts/build-os-image.sh)",
        )


class Trial:
    """One task folder's container, driven as Harbor's docker environment drives it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.config = tomllib.loads((folder / "task.toml").read_text(encoding="utf-8"))
        self.image = f"harnessctl-harbor-test:{folder.name}-{uuid.uuid4().hex[:8]}"
        _docker("build", "-q", "-t", self.image, str(folder / "environment"))
        label_args = [a for k, v in labels(f"harbor-{uuid.uuid4().hex[:8]}").items()
                      for a in ("--label", f"{k}={v}")]  # fmt: skip
        self.id = _docker(
            "run", "-d", *label_args, "--network", "none", "--memory", "512m", self.image,
            "sh", "-c", "sleep infinity",
        ).strip()  # fmt: skip
        self.sh("mkdir -p /logs/agent /logs/verifier")  # Harbor mounts them
        healthcheck = self.config["environment"].get("healthcheck")
        if healthcheck is not None:
            self.sh(healthcheck["command"])

    def sh(self, command: str) -> str:
        return _docker("exec", self.id, "bash", "-c", command, timeout=120)

    def upload(self, part: str, target: str) -> None:
        _docker("cp", f"{self.folder / part}/.", f"{self.id}:{target}")

    def solve(self) -> None:
        self.upload("solution", "/solution")
        self.sh("chmod +x /solution/solve.sh && /solution/solve.sh > /logs/agent/oracle.txt 2>&1")

    def reward(self) -> int:
        self.upload("tests", "/tests")
        self.sh("chmod +x /tests/test.sh && /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1")
        return int(self.sh(f"cat {REWARD_FILE}"))

    def close(self) -> None:
        subprocess.run(["docker", "rm", "-f", self.id], capture_output=True, timeout=60)
        subprocess.run(["docker", "rmi", "-f", self.image], capture_output=True, timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("task_id", "wrong"),
    [
        # match, an init and a program left running by `start`: the file it writes
        ("dev.1", f"echo a.log > {ANSWER_FILE}"),
        # init draws random data; the checks compare with the example's output
        ("dev.25", f"echo 100000 > {ANSWER_FILE}"),
        # a check script reads the system the agent changed (installs `calc`)
        ("dev.3", "printf '#!/bin/bash\\necho 0\\n' > /usr/local/bin/calc"),
    ],
    ids=["dev.1-match", "dev.25-check-chain", "dev.3-check-script"],
)
def test_gold_scores_1_and_a_wrong_commit_0_in_the_container(
    engine, exported, task_id, wrong
) -> None:
    out, _, _ = exported
    trial = Trial(out / task_id)
    try:
        assert trial.sh("test -e /opt/harnessctl-setup && echo left || echo gone").strip() == "gone"
        if task_id == "dev.1":
            assert "/root/log" in trial.sh("ps -eo args")  # start's program runs
        trial.solve()
        assert trial.reward() == 1, trial.sh("cat /logs/verifier/detail.json")
        assert trial.sh("test -e /tests && echo left || echo gone").strip() == "gone"
        trial.sh(wrong)
        assert trial.reward() == 0, trial.sh("cat /logs/verifier/detail.json")
        if task_id == "dev.1":
            trial.sh(f"rm -f {ANSWER_FILE}")
            assert trial.reward() == 0
    finally:
        trial.close()
