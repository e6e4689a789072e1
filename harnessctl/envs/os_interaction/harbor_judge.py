"""The verifier of an os_interaction task exported to Harbor (``harnessctl export-harbor``).

A stdlib-only script: the exporter copies this file into a task folder's ``tests/`` and
``tests/test.sh`` runs it inside the task container, after the agent, as
``python3 -I judge.py verdict.json``. It gives the verdict :meth:`OSEnvironment.score` gives
with ``expected: live`` (AgentBench's own judge), and writes the reward (``1`` or ``0``) to
the reward file and what it saw to ``detail.json`` beside it:

- a setup that failed (an init script exited non-zero: the setup wrote the failure file) is a
  failed sample: 0;
- the answer is the answer file's text less one final newline; no file: no answer;
- ``match``: the answer, stripped, equals the expected string (or the regex finds it);
- ``check``: the arguments start as ``[str(answer)]`` (``"None"`` without one); each check
  script (``null``: the example script) runs with them in ``/``, as ``bash -c CODE -- ARGS``
  or ``python3 -c CODE ARGS``, and must exit 0; its output (stdout and stderr, control
  characters removed, the first 64 KiB) is appended to the arguments. The checks have 20 s
  together; past it the verdict is 0, as the native rollout ends ``timeout``;
- the checks run after this script removed its own folder (``/tests``, which Harbor uploads
  into the agent's filesystem after the agent ran): they see the system as the agent left it.

The checks run with the container's own programs, as AgentBench's do: harnessctl's read-only
copy of the image's tools (``trusted.py``) is not in a Harbor container.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean_text(raw: bytes) -> str:
    """A check's output as the environment keeps it (``container.clean_text``)."""
    text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n")
    return CONTROL.sub("", text)


def read_answer(path: str) -> str | None:
    """The answer file's text less one final newline; None when there is no file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    text = raw.decode("utf-8", errors="surrogateescape")
    return text[:-1] if text.endswith("\n") else text


def matches(rule: dict[str, str], answer: str | None) -> bool:
    if answer is None:
        return False
    if "regex" in rule:
        return re.search(rule["regex"], answer) is not None
    return answer.strip() == rule["answer"]


def run_script(
    language: str, code: str, params: list[str], timeout: float, limit: int
) -> tuple[int | None, str]:
    """(exit status, output) of one check in ``/``; status None: it ran past ``timeout``."""
    if language == "python":
        argv = ["python3", "-c", code, *params]
    else:
        argv = ["bash", "-c", code, *(["--", *params] if params else [])]
    try:
        proc = subprocess.Popen(
            argv, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    except (OSError, ValueError) as exc:  # arguments no program can take
        return 126, f"the check could not start with these arguments: {exc}"
    kept = bytearray()
    stream = proc.stdout
    assert stream is not None

    def drain() -> None:  # keep the first ``limit`` bytes, read and drop the rest
        for chunk in iter(lambda: stream.read(65536), b""):
            if len(kept) < limit:
                kept.extend(chunk[: limit - len(kept)])

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        status = proc.wait(timeout=max(timeout, 0.01))
    except subprocess.TimeoutExpired:  # the check and what it started
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None, ""
    finally:
        reader.join(timeout=5)
    return status, clean_text(bytes(kept))


def load_chain(spec: dict[str, Any], folder: str) -> list[tuple[str, str]]:
    """``[language, code]`` of each check of the chain (``null``: the example), read now."""
    chain = []
    for entry in spec.get("check") or []:
        script = spec["example"] if entry is None else entry
        with open(os.path.join(folder, script["file"]), encoding="utf-8") as f:
            chain.append((script["language"], f.read()))
    return chain


def judge(spec: dict[str, Any], chain: list[tuple[str, str]], detail: dict[str, Any]) -> int:
    """The reward (0 or 1) of the state and answer the agent left; ``detail`` says why."""
    failed = spec.get("setup_failed_file")
    if failed and os.path.exists(failed):
        with open(failed, encoding="utf-8", errors="replace") as f:
            detail["setup"] = "failed: " + f.read().strip()[-300:]
        return 0
    answer = read_answer(spec["answer_file"])
    detail["answer"] = answer
    if spec.get("match") is not None:
        return int(matches(spec["match"], answer))
    params = [str(answer)]
    if "\x00" in params[0]:
        detail["checks"] = "the answer holds a NUL byte"
        return 0
    statuses: list[int] = []
    detail["checks"] = statuses
    deadline = time.monotonic() + spec["timeout_s"]
    for language, code in chain:
        status, output = run_script(
            language, code, params, deadline - time.monotonic(), spec["output_bytes"]
        )
        if status is None:
            detail["timeout"] = f"checks ran past {spec['timeout_s']:g}s"
            return 0
        statuses.append(status)
        if status != 0:
            return 0
        params.append(output)
    return 1


def main(argv: list[str]) -> int:
    path = argv[1]
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    folder = os.path.dirname(os.path.abspath(path))
    chain = load_chain(spec, folder)
    if spec.get("remove_own_folder"):
        # Harbor uploads the verifier into the agent's filesystem: gone again, the checks
        # see the system as the agent left it (``ls /`` counts no ``/tests``)
        shutil.rmtree(folder, ignore_errors=True)
    detail: dict[str, Any] = {"task_id": spec.get("task_id")}
    reward = judge(spec, chain, detail)
    detail["reward"] = reward
    reward_file = spec["reward_file"]
    os.makedirs(os.path.dirname(reward_file), exist_ok=True)
    with open(os.path.join(os.path.dirname(reward_file), "detail.json"), "w") as f:
        json.dump(detail, f, indent=2, ensure_ascii=True, default=str)
    with open(reward_file, "w") as f:
        f.write(f"{reward}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
