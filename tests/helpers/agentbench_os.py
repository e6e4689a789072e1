"""AgentBench v0.2's OS-interaction judge as a reference, and the replies both sides get.

The reference is written here from the behaviour of AgentBench's ``OSInteraction``
(THUDM/AgentBench, ``src/server/tasks/os_interaction/task.py`` at commit ac57ad0, Apache-2.0),
not copied from it; what it does, step by step:

- a container of the task image, started as AgentBench starts it (``-t -i``, its program
  ``bash``; no network here, as in harnessctl's, because nothing here has one);
- the agent's shell: ``bash --login`` on a terminal (``docker exec -it``), opened with the
  container, before the init scripts run (its login read the profile as the image had it);
- each ``init`` script on its own (``docker exec``: ``bash -c`` / ``python3 -c``): one that
  exits non-zero ends the sample as a failure (status UNKNOWN, result False);
- the ``start`` script's text typed into the agent's shell, then each command (what
  ``start`` leaves, a ``su - jack`` included, is the agent's shell);
- every command in ``/`` (AgentBench's image sets no working directory; this image's is
  ``/root``, so the reference names ``/``); the agent's commands read ``/dev/null``, as in
  harnessctl's shell (the one difference of the two shells that this reference keeps: a
  terminal on a command's input changes what some programs print, ``find``'s warnings,
  not the system; the output stays on the terminal, as AgentBench's);
- the agent's reply parsed as AgentBench parses it (:func:`extract_action`: the last ``Act:``
  line; bash blocks joined; the answer between the first ``(`` and the last ``)``); no
  action ends the sample as a failure (AGENT_INVALID_ACTION), as does the round limit;
- the judge: ``match`` compares the answer (stripped when the record gave a string) with the
  expected string or searches the regex; ``check`` runs each script (``None``: the example)
  on its own with ``[str(answer), outputs...]`` and needs exit 0 from each.

The reference's own shell runs with no prompt and no echo (``PS1=``, ``stty -echo``, set
after ``start``) so that a command's output can be read back: that is how this harness reads
its terminal, not part of the task's state. :func:`plans` builds the replies the agreement
benchmark and its CI test give both sides: the gold (the environment's replay script), a
wrong commit, and the gold's commands left unfinished (a reply with no action).
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import secrets
import select
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from harnessctl.envs import Task
from harnessctl.envs.os_interaction import OSEnvironment
from harnessctl.envs.os_interaction.container import docker, labels

COMMAND_S = 30.0  # AgentBench reads a command's output for 30 s at most
#: Tasks of the standard split whose setup or gold installs packages from the network
#: (``apt install sudo``): not provisionable offline, so they say nothing about the judge.
NOT_OFFLINE = ("6.new.5", "6.new.6", "6.new.8")
#: Tasks whose expected answer moves with time, in AgentBench too: 7.bootstrap.6 asks for
#: the share of memory in use (the host's, as ``free`` reads it): the answer and the check
#: each read it at their own moment, so neither verdict is a property of the judge.
VOLATILE = ("7.bootstrap.6",)
#: What the agent's shell is after setup: its user and its directory.
SHELL_PROBE = "id -un; pwd"
_ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[a-zA-Z]|\x1b\][0-9]*;[^\x07]*\x07|\x07")
WRONG = "hx-wrong-answer"


def extract_action(raw: str) -> dict[str, Any]:
    """An agent reply as AgentBench v0.2 reads it: ``action`` is ``bash``, ``commit`` (an
    answer or finish) or None; ``content`` the command or the answer."""
    acts = re.findall(r"Act:\s*(.+)", raw)
    action: str | None = None
    content: str | None = None
    for act in reversed(acts):
        lowered = act.lower()
        if lowered.startswith("bash"):
            action = "bash"
            break
        if lowered.startswith("finish"):
            action = "commit"
            break
        if lowered.startswith("answer"):
            rest = act[6:].strip()
            left, right = rest.find("("), rest.rfind(")")
            if left == -1 or right == -1:
                continue
            action, content = "commit", rest[left + 1 : right]
            break
    if action == "bash":
        content = "\n\n".join(re.findall(r"```bash\n(.*?)\n```", raw, re.DOTALL))
    return {"action": action, "content": content}


@dataclass
class Plan:
    """The replies of one run: ``commands`` (bash, in order), then ``final``: a reply text
    whose ``{output}`` is the last command's output as the agent saw it."""

    kind: str  # gold, wrong, unfinished
    commands: list[str]
    final: str

    def final_reply(self, last_output: str) -> str:
        return self.final.replace("{output}", last_output.strip())


def plans(env: OSEnvironment, task: Task) -> list[Plan]:
    """Gold (the environment's replay script), wrong (no command; a wrong answer, or finish
    where no check reads the answer) and unfinished (the gold's commands, then no action)."""
    script = env.replay(task)
    commands = [s["tool_call"]["arguments"]["script"] for s in script[:-1]]
    last = script[-1]
    final = str(last.get("text") or "")
    answers = "answer(" in final
    wrong = f"Think: I know it.\n\nAct: answer({WRONG})" if answers else "Act: finish"
    return [
        Plan("gold", commands, final),
        Plan("wrong", [], wrong),
        Plan("unfinished", commands, "Think: I have run it; nothing more to do."),
    ]


@dataclass
class Verdict:
    success: bool
    why: str
    observations: list[str] = field(default_factory=list)


# --- harnessctl's side -------------------------------------------------------------------


def run_harnessctl(env: OSEnvironment, task: Task, plan: Plan) -> Verdict:
    """The plan through harnessctl's episode and score (the environment's own verdict)."""
    return run_harnessctl_plans(env, task, [plan])[plan.kind]


def run_harnessctl_plans(env: OSEnvironment, task: Task, group: list[Plan]) -> dict[str, Verdict]:
    """Plans that share their commands in one episode: each plan but the last ends without
    committing (no answer, no finish: scoring runs nothing in the container), so each is
    scored in turn on the same state, the committing one last."""
    assert len({tuple(p.commands) for p in group}) == 1, "the plans must share their commands"
    episode = env.open_episode(task, 0)
    verdicts: dict[str, Verdict] = {}
    try:
        first = episode.reset()
        seen = []
        for command in group[0].commands:
            if episode.finished or episode.broken or episode.setup_error:
                break
            seen.append(episode.step("bash", command, None).observation)
        for plan in group:
            reply = extract_action(plan.final_reply(seen[-1] if seen else first.observation))
            answer = None
            if reply["action"] == "commit":
                assert plan is group[-1], "only the last plan may commit"
                answer = reply["content"]
                if answer is None:
                    episode.step("finish", "", None)
            score = env.score(task, env_root(), answer, episode)
            verdicts[plan.kind] = Verdict(score.success, _why(score.detail), seen)
        return verdicts
    finally:
        episode.close()


def agreement(env: OSEnvironment, task: Task) -> list[tuple[str, Verdict, Verdict]]:
    """``(reply, harnessctl's verdict, the reference's)`` for each of :func:`plans`, in four
    containers: the unfinished reply shares the gold's (scored before the gold commits) on
    harnessctl's side and needs none on the reference's (AgentBench judges no reply without
    an action). Each gold answers what its own agent saw: an init script may draw the data
    at random (1.stock's log), so each container holds its own answer."""
    gold, wrong, unfinished = plans(env, task)
    ours = run_harnessctl_plans(env, task, [unfinished, gold])
    ours.update(run_harnessctl_plans(env, task, [wrong]))
    return [
        (p.kind, ours[p.kind], run_reference(task.record, p, env.image))
        for p in (gold, wrong, unfinished)
    ]


def env_root():
    from tests.helpers import ROOT

    return ROOT


def _why(detail: dict[str, Any]) -> str:
    for key in ("setup", "checks"):
        if key in detail:
            return f"{key}: {detail[key]}"
    return "match"


# --- the reference -----------------------------------------------------------------------


class _Terminal:
    """``docker exec -it ID bash --login`` on a pseudo-terminal of ours."""

    def __init__(self, container: str) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            ["docker", "exec", "-it", "-w", "/", container, "bash", "--login"],
            stdin=slave, stdout=slave, stderr=slave, close_fds=True,
        )  # fmt: skip
        os.close(slave)
        self.buffer = b""

    def send(self, text: str) -> None:
        os.write(self.master, text.encode("utf-8"))

    def sync(self, timeout: float = COMMAND_S) -> bytes:
        """Type a marker command and read until its output (what came before it)."""
        nonce = secrets.token_hex(4)
        # the shell prints 42 where the terminal echoes $((40+2)): the echo is never taken
        self.send(f"echo __REF_$((40+2))_{nonce}\n")
        marker = f"__REF_42_{nonce}".encode()
        deadline = time.monotonic() + timeout
        while marker not in self.buffer and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.buffer += os.read(self.master, 65536)
                except OSError:
                    break
        out, _, self.buffer = self.buffer.partition(marker)
        self.buffer = self.buffer.partition(b"\n")[2]
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.kill()
            self.proc.wait(timeout=5)
        with contextlib.suppress(OSError):
            os.close(self.master)


def _clean(raw: bytes) -> str:
    text = _ESCAPES.sub(b"", raw).decode("utf-8", "replace").replace("\r", "")
    lines = [line for line in text.split("\n") if not line.startswith("echo __REF_")]
    return "\n".join(lines)


def _exec(container: str, language: str, code: str, params: tuple[str, ...] = ()):
    cmd = ["python3", "-c", code, *params] if language == "python" else ["bash", "-c", code]
    if language != "python" and params:
        cmd += ["--", *params]
    done = subprocess.run(
        ["docker", "exec", "-w", "/", container, *cmd],
        capture_output=True,
        timeout=120,
        check=False,
    )
    return done.returncode, (done.stdout + done.stderr).decode("utf-8", "replace")


class _Reference:
    """A task container set up as AgentBench sets one up (see the module docstring)."""

    def __init__(self, record: dict[str, Any], image: str) -> None:
        label_args = [
            a for k, v in labels("agentbench-ref").items() for a in ("--label", f"{k}={v}")
        ]
        self.container = docker(
            "run", "-d", "-t", "-i", "--network", "none", "-w", "/", *label_args, image, "bash"
        ).strip()  # fmt: skip
        self.setup_failed: str | None = None
        # AgentBench opens the agent's shell with the container, before the init scripts
        # run: its login read the profile as the image left it
        self.terminal = _Terminal(self.container)
        self.terminal.sync()
        for n, (language, code) in enumerate(record["init"]):
            status, _ = _exec(self.container, language, code)
            if status != 0:
                self.setup_failed = f"setup: init script {n} exited {status}"
                return
        if record["start"] is not None:
            self.terminal.send(record["start"][1] + "\n")
            self.terminal.sync()
        self.terminal.send("PS1=; PS2=; stty -echo\n")
        self.terminal.sync()

    def run(self, command: str) -> str:
        # stdin from /dev/null, as in harnessctl's shell (docs/os_interaction.md): a terminal
        # there changes what some programs print (find's warnings), not what the system is
        self.terminal.send("{ " + command + "\n} </dev/null\n")
        return _clean(self.terminal.sync()).strip("\n")

    def close(self) -> None:
        self.terminal.close()
        docker("rm", "-f", self.container, check=False)


def run_reference(
    record: dict[str, Any], plan: Plan, image: str, output: str | None = None
) -> Verdict:
    """The plan through the reference judge (see the module docstring); ``output``: what
    fills the final reply's ``{output}`` (harnessctl's observation, so that both judges get
    the same reply), else the reference's own last output."""
    if extract_action(plan.final)["action"] != "commit":  # judged without the system
        return Verdict(False, "no answer or finish")
    ref = _Reference(record, image)
    try:
        if ref.setup_failed:
            return Verdict(False, ref.setup_failed)
        seen = [ref.run(command) for command in plan.commands]
        last = output if output is not None else (seen[-1] if seen else "")
        reply = extract_action(plan.final_reply(last))
        if reply["action"] != "commit":
            return Verdict(False, "no answer or finish", seen)
        return Verdict(*_judge(ref.container, record, reply["content"]), seen)
    finally:
        ref.close()


def compare_shell(env: OSEnvironment, task: Task) -> dict[str, Any]:
    """The agent's shell after setup (:data:`SHELL_PROBE`) on both sides."""
    episode = env.open_episode(task, 0)
    try:
        episode.reset()
        ours = episode.step("bash", SHELL_PROBE, None).observation.split()
    finally:
        episode.close()
    ref = _Reference(task.record, env.image)
    try:
        theirs = ref.run(SHELL_PROBE).split()
    finally:
        ref.close()
    return {"task": task.id, "harnessctl": ours, "agentbench": theirs, "agree": ours == theirs}


def _judge(container: str, record: dict[str, Any], answer: str | None) -> tuple[bool, str]:
    match = record["match"]
    if match is not None:
        if answer is not None:  # every match of the split is a string: AgentBench strips
            answer = answer.strip()
        if answer is None:
            return False, "match: no answer"
        if "regex" in match:
            return re.search(match["regex"], answer) is not None, "match"
        return answer == match["answer"], "match"
    params = [str(answer)]
    statuses = []
    for script in record["check"]:
        language, code = script if script is not None else record["example"]
        status, output = _exec(container, language, code, tuple(params))
        statuses.append(status)
        if status != 0:
            return False, f"checks: {statuses}"
        params.append(output)
    return True, f"checks: {statuses}"
