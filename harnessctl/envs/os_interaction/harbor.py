"""os_interaction tasks as Harbor task folders (``harnessctl export-harbor``; docs/harbor.md).

One folder per task, for Harbor's docker environment (or any that builds a Dockerfile):

- ``environment/Dockerfile``: ``FROM`` the environment's task image (``harnessctl-os:latest``,
  built locally by ``scripts/build-os-image.sh``), working directory ``/``; a task with
  ``init`` or ``start`` scripts also gets ``harnessctl-setup/``, which ``task.toml``'s
  healthcheck runs once before the agent starts (Harbor runs the healthcheck in every
  provider): each init script on its own, in ``/``, in order (one that exits non-zero makes
  the task a failed sample: the verifier's reward is 0), then ``start`` left running in the
  background; the setup folder then removes itself, so the agent never reads the scripts;
- ``instruction.md``: the task's description and the answer convention (the final answer goes
  to :data:`ANSWER_FILE`);
- ``tests/``: ``test.sh`` runs ``judge.py`` (:mod:`.harbor_judge`) on ``verdict.json`` and the
  task's check and example scripts, giving :meth:`OSEnvironment.score`'s verdict with
  ``expected: live`` (AgentBench's: the example runs with the checks, after the agent);
- ``solution/solve.sh``: the gold, as ``replay/os_interaction`` plays it: the expected string
  of a ``match`` task written as the answer; else the example script run in ``/`` and, where
  the verdict reads the answer, its output (stripped) written as the answer.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from harnessctl import bounds
from harnessctl.envs import Environment, Task
from harnessctl.envs.harbor import (
    ANSWER_FILE,
    REWARD_FILE,
    SCHEMA_VERSION,
    ExportContext,
    HarborExporter,
    HarborTask,
)
from harnessctl.errors import ConfigError

from . import OSEnvironment
from .episode import INIT_TIMEOUT_S, MAX_ROUNDS, OUTPUT_LIMIT, reads_answer

JUDGE = Path(__file__).with_name("harbor_judge.py")
SETUP_DIR = "/opt/harnessctl-setup"
SETUP_FAILED = "/var/lib/harnessctl/setup-failed"
HEALTHCHECK = f"test ! -e {SETUP_DIR}/setup.sh || bash {SETUP_DIR}/setup.sh"
VERIFIER_TIMEOUT_S = bounds.SCORE_TIMEOUT_S + 40.0
EXT = {"bash": "sh", "python": "py"}
RUN = {"bash": "bash -c", "python": "python3 -c"}

INSTRUCTION_TAIL = f"""
---

If the task asks a question, write your answer, and nothing else, to `{ANSWER_FILE}` (for
example `echo 42 > {ANSWER_FILE}`).
If it asks you to change the system, change it: no answer is needed.
"""


def _setup_script(task: Task) -> str:
    record = task.record
    lines = [
        "#!/bin/bash",
        f"# The setup of os_interaction task {task.id} (harnessctl export-harbor), run once by",
        "# the task's healthcheck before the agent starts: each init script on its own, in /,",
        "# in order (one that exits non-zero: a failed sample, as in AgentBench), then `start`",
        "# left running. It removes its folder, so the agent never reads the scripts.",
        f"dir={SETUP_DIR}",
        '[ -d "$dir" ] || exit 0',
        "cd / || exit 0",
        "failed() {",
        f"    mkdir -p {shlex.quote(str(Path(SETUP_FAILED).parent))}",
        f"    printf '%s\\n' \"$1\" > {SETUP_FAILED}",
        '    rm -rf "$dir"',
        "    exit 0",
        "}",
    ]
    for n, (language, _) in enumerate(record["init"]):
        name = f"init-{n}.{EXT[language]}"
        lines.append(
            f'{RUN[language]} "$(cat "$dir/{name}")" </dev/null >"$dir/out" 2>&1 || '
            f'failed "init script {n} exited $?: $(tail -c 300 "$dir/out")"'
        )
    if record["start"] is not None:
        # read before the folder goes: the background job expands its words after the fork
        lines.append('start=$(cat "$dir/start.sh")')
        lines.append('setsid bash -c "$start" </dev/null >/dev/null 2>&1 &')
    lines += ['rm -rf "$dir"', "exit 0", ""]
    return "\n".join(lines)


def _solution(task: Task) -> tuple[dict[str, str], list[str]]:
    """``solution/``'s files and the caveats of the gold."""
    record = task.record
    head = [
        "#!/bin/bash",
        f"# The gold of os_interaction task {task.id} (harnessctl export-harbor):",
    ]
    write = ["mkdir -p /logs/agent", f"printf '%s\\n' \"$output\" > {ANSWER_FILE}"]
    match, example = record["match"], record["example"]
    if match is not None:
        if "answer" not in match:
            body = ["# the expected answer is a regex: there is no gold string to write", "exit 0"]
            return {"solve.sh": "\n".join(head + body) + "\n"}, [
                "the expected answer is a regex: solve.sh has no gold string to write"
            ]
        body = [
            "# its expected answer, written where the verifier reads the agent's.",
            f"output={shlex.quote(match['answer'])}",
            *write,
        ]
        return {"solve.sh": "\n".join(head + body) + "\n"}, []
    if example is None:
        body = ["# the task has no example script: no gold commands to run", "exit 0"]
        caveats = ["no example script: solve.sh has no gold commands to run"]
        return {"solve.sh": "\n".join(head + body) + "\n"}, caveats
    language, code = example
    name = f"example.{EXT[language]}"
    run = f'{RUN[language]} "$(cat "$here/{name}")" </dev/null'
    body = [
        "# its example script (the reference commands), run in / as replay/os_interaction runs",
        "# it" + ("; its output, stripped, is the answer." if reads_answer(record) else "."),
        'here=$(cd "$(dirname "$0")" && pwd)',
        "cd / || exit 1",
    ]
    if reads_answer(record):
        body += [
            f"output=$({run} 2>&1)",
            'output="${output#"${output%%[![:space:]]*}"}"',
            'output="${output%"${output##*[![:space:]]}"}"',
            *write,
        ]
    else:
        body += [run, "exit 0"]
    return {"solve.sh": "\n".join(head + body) + "\n", name: code}, []


def _tests(task: Task) -> dict[str, str]:
    record = task.record
    files: dict[str, str] = {}

    def script(entry: list[str], name: str) -> dict[str, str]:
        language, code = entry
        file = f"checks/{name}.{EXT[language]}"
        files[file] = code
        return {"language": language, "file": file}

    example = script(record["example"], "example") if record["example"] else None
    check = None
    if record["check"] is not None:
        check = [None if c is None else script(c, str(n)) for n, c in enumerate(record["check"])]
    verdict = {
        "task_id": task.id,
        "match": record["match"],
        "check": check,
        "example": example,
        "expected": "live",
        "answer_file": ANSWER_FILE,
        "reward_file": REWARD_FILE,
        "setup_failed_file": SETUP_FAILED,
        "timeout_s": bounds.SCORE_TIMEOUT_S,
        "output_bytes": bounds.CHECK_OUTPUT_BYTES,
        "remove_own_folder": True,
    }
    test_sh = "\n".join(
        [
            "#!/bin/bash",
            f"# The verifier of os_interaction task {task.id} (harnessctl export-harbor): the",
            "# environment's verdict (judge.py, verdict.json); the reward is 0 unless it says 1.",
            'here=$(cd "$(dirname "$0")" && pwd)',
            f"mkdir -p {shlex.quote(str(Path(REWARD_FILE).parent))}",
            f"echo 0 > {REWARD_FILE}",
            'python3 -I "$here/judge.py" "$here/verdict.json"',
            "exit 0",
            "",
        ]
    )
    files["verdict.json"] = json.dumps(verdict, indent=2, ensure_ascii=False) + "\n"
    files["judge.py"] = JUDGE.read_text(encoding="utf-8")
    files["test.sh"] = test_sh
    return files


def _caveats(env: OSEnvironment, task: Task) -> list[str]:
    record, out = task.record, []
    start = record["start"]
    if start is not None and not start[1].rstrip().endswith("&"):
        out.append(
            "AgentBench types `start` into the agent's shell, where what it sets (a variable, "
            "the directory, the user) is the agent's; Harbor has no such shell: the export "
            "runs it in the background at setup, and that state is lost"
        )
    if record["image"] != "default":
        out.append(f"AgentBench runs it in its {record['image']!r} image; this runs {env.image}")
    return out


def _dockerfile(env: OSEnvironment, task: Task, setup: bool) -> str:
    lines = [
        f"# os_interaction task {task.id} (harnessctl export-harbor): the environment's task",
        "# image (scripts/build-os-image.sh builds it locally); every command runs in /.",
        f"FROM {env.image}",
        "WORKDIR /",
    ]
    if setup:
        lines.append(f"COPY harnessctl-setup/ {SETUP_DIR}/")
    return "\n".join(lines) + "\n"


class OSHarborExporter(HarborExporter):
    """The ``os_interaction`` kind's exporter (see the module docstring)."""

    def export_harbor(self, env: Environment, task: Task, context: ExportContext) -> HarborTask:
        if not isinstance(env, OSEnvironment):
            raise ConfigError("env", f"{type(env).__name__} is not an os_interaction environment")
        record, cpus = task.record, env.limits.cpus
        setup: dict[str, str] = {}
        for n, (language, code) in enumerate(record["init"]):
            setup[f"harnessctl-setup/init-{n}.{EXT[language]}"] = code
        if record["start"] is not None:
            setup["harnessctl-setup/start.sh"] = record["start"][1]
        if setup:
            setup["harnessctl-setup/setup.sh"] = _setup_script(task)
        solution, gold_caveats = _solution(task)
        caveats = _caveats(env, task) + gold_caveats
        environment: dict[str, Any] = {
            "cpus": int(cpus) if float(cpus).is_integer() else cpus,
            "memory_mb": env.limits.memory_mb,
            "network_mode": "no-network",
            "workdir": "/",
        }
        if setup:
            timeout = INIT_TIMEOUT_S * max(1, len(record["init"])) + 30.0
            environment["healthcheck"] = {"command": HEALTHCHECK, "timeout_sec": timeout}
        description = record["description"].strip()
        config: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "task": {
                "name": f"{context.suite}/{task.id}",
                "description": description.splitlines()[0][:200] if description else task.id,
                "keywords": list(record["labels"]),
            },
            "metadata": {
                "category": task.category,
                "harnessctl": {
                    "env": env.kind,
                    "suite": context.suite_id,
                    "split": context.split,
                    "task_id": task.id,
                    "content_hash": task.content_hash,
                    "image": env.image,
                    "verdict": "match" if record["match"] is not None else "check",
                    "reads_answer": reads_answer(record),
                    "expected": "live",
                    "answer_file": ANSWER_FILE,
                    "max_rounds": MAX_ROUNDS,
                    "command_timeout_s": env.limits.command_timeout_s,
                    "output_limit_chars": OUTPUT_LIMIT,
                    "disk_mb": env.limits.disk_mb,
                    "pids": env.limits.pids,
                    "attribution": context.attribution,
                    "caveats": caveats,
                },
            },
            "verifier": {"timeout_sec": VERIFIER_TIMEOUT_S},
            "agent": {"timeout_sec": float(context.timeout_s)},
            "environment": environment,
        }
        return HarborTask(
            name=task.id,
            instruction=description + "\n" + INSTRUCTION_TAIL,
            config=config,
            dockerfile=_dockerfile(env, task, bool(setup)),
            environment=setup,
            tests=_tests(task),
            solution=solution,
            caveats=caveats,
        )
