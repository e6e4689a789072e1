"""One rollout's task container, set up as AgentBench sets it up, acted on through two tools.

Setup, in AgentBench's order: the container starts with the agent's shell (:mod:`.container`),
the ``init`` scripts run each on its own, then ``start`` is typed into the agent's shell.
An init script that exits non-zero is a **failed sample**, as in AgentBench (status UNKNOWN,
result False): the episode ends at once and the rollout is scored a failure
(``wrong_answer``, the score's detail ``setup``); only the host's own failures (the engine,
a setup that does not finish in :data:`INIT_TIMEOUT_S`) are infrastructure errors.

With ``expected="snapshot"`` (the default) the example script of a task whose checks compare
the answer with the example's output runs once more after setup, before the agent's first
command, with the checks' tools; its output stands for the example in the checks, so an
agent that wipes the state the question is about (empty ``/home``, answer 0) cannot make its
answer the expected one. What that run adds to the container's filesystem is removed again
(where the script may write at all; a ``/tmp`` file it writes stays). ``expected="live"``
keeps AgentBench's behaviour: the example runs with the checks, after the episode, on the
state the agent left.

An agent that breaks its own shell so that no new one can start (``echo 'exit 0' >>
/etc/profile; exit``) ends its episode there: a scored failure, never an infrastructure error.
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any

from harnessctl import bounds
from harnessctl.envs import Episode, StepResult, Task

from .container import CommandResult, ContainerError, Limits, SessionBroken, TaskContainer

TOOLS = ("bash", "finish")
#: AgentBench's protocol: at most 8 rounds.
MAX_ROUNDS = 8
#: AgentBench cuts a command's output at 800 characters: the first 780 and this note.
OUTPUT_LIMIT = 800
OUTPUT_KEEP = 780
TRUNCATED_NOTE = "\n[truncated because the output is too long]"
#: An init script that runs longer is the host's failure (AgentBench waits for as long as it
#: takes; 7.bootstrap.0's init holds its output open for 60 s).
INIT_TIMEOUT_S = 150.0
EXPECTED_MODES = ("snapshot", "live")


def shape_output(text: str) -> str:
    """AgentBench's truncation of a command's output."""
    if len(text) > OUTPUT_LIMIT:
        return text[:OUTPUT_KEEP] + TRUNCATED_NOTE
    return text


def _reads_arguments(language: str, code: str) -> bool:
    """Whether a script reads the arguments it is given (a check, the answer first): a
    python script that names ``argv``, a bash script whose top level names ``$1``, ``$@``,
    ``$*`` or ``$#`` (inside single quotes, awk's ``$1``, or a function body, not)."""
    if language == "python":
        return re.search(r"\bargv\b", code) is not None
    top = re.sub(r"'[^']*'", "''", code)
    while True:  # drop function bodies: their $1 is their own
        found = re.search(r"\w+\s*\(\)\s*\{", top)
        if found is None:
            break
        depth, end = 0, len(top)
        for i in range(found.end() - 1, len(top)):
            depth += {"{": 1, "}": -1}.get(top[i], 0)
            if depth == 0:
                end = i + 1
                break
        top = top[: found.start()] + top[end:]
    return re.search(r"\$(\{?[1-9@*#])", top) is not None


_WRITERS = re.compile(
    r"\b(mkdir|touch|cp|mv|rm|tee|ln|dd|install|chmod|chown|truncate|sed\s+-i|tar|unzip|zip"
    r"|git|useradd)\b"
)


def _may_write(language: str, code: str) -> bool:
    """Whether an example script may write files (its writes are then undone after the
    snapshot): python, a redirection other than to /dev/null or another descriptor, or a
    program that creates, moves or changes files."""
    if language == "python":
        return True
    plain = re.sub(r"[0-9]*>&[0-9-]|[0-9]*>+\s*/dev/null", "", code)
    return ">" in plain or _WRITERS.search(plain) is not None


def reads_answer(record: dict[str, Any]) -> bool:
    """Whether the task's verdict reads the answer: a match, the example's output compared
    with it (a ``null`` check), or a check script that reads its first argument."""
    if record["match"] is not None:
        return True
    return any(c is None or _reads_arguments(*c) for c in record["check"] or [])


class OSEpisode(Episode):
    """One task container for one rollout (host only; see harnessctl.envs.Episode).

    ``events`` (host only, in the score's detail) records every command stopped at a limit
    (``timeout``, ``disk``), every command that ended the shell, and a shell the agent broke
    (``session_broken``). ``setup_error`` is set when the task's setup failed (a failed
    sample); ``expected`` holds the snapshot's (status, output) of the example."""

    def __init__(
        self, task: Task, image: str, limits: Limits, expected_mode: str = "snapshot"
    ) -> None:
        self.task = task
        self.image = image
        self.limits = limits
        self.expected_mode = expected_mode
        self.container: TaskContainer | None = None
        self.finished = False
        self.broken: str | None = None
        self.commands = 0
        self.events: list[dict[str, Any]] = []
        self.init_status: list[int | None] = []
        self.setup_error: str | None = None
        self.expected: tuple[int | None, str] | None = None
        self._booting: threading.Thread | None = None
        self._booted: TaskContainer | None = None
        self._boot_error: BaseException | None = None

    def boot(self) -> None:
        """Start the task container in the background (``open_episode`` calls it, so the
        container starts while the sandbox does); ``reset`` takes it over."""
        self._booting = threading.Thread(target=self._boot_into_slot, daemon=True)
        self._booting.start()

    def _boot_into_slot(self) -> None:
        try:
            self._booted = self._boot()
        except BaseException as exc:  # handed to reset, which raises it
            self._boot_error = exc

    def _boot(self) -> TaskContainer:
        container = TaskContainer(self.image, self.limits)
        self.init_status, self.setup_error, self.expected = [], None, None
        try:
            container.start()
            for n, (language, code) in enumerate(self.task.record["init"]):
                status, output = container.run_script(language, code, timeout=INIT_TIMEOUT_S)
                self.init_status.append(status)
                if status is None:  # the host gave up waiting: its failure
                    raise ContainerError(
                        f"task {self.task.id}: its setup (init script {n}) did not finish "
                        f"within {INIT_TIMEOUT_S:g}s"
                    )
                if status != 0:  # AgentBench: a failed sample
                    self.setup_error = f"init script {n} exited {status}: {output.strip()[-300:]}"
                    return container
            start = self.task.record["start"]
            if start is not None:
                try:
                    container.run_start(start[1])
                except SessionBroken as exc:  # the task's own start broke the shell
                    self.setup_error = f"start: {exc}"
                    return container
            self.expected = self._snapshot(container)
            container.arm()
        except BaseException:
            container.close()
            raise
        return container

    def _snapshot(self, container: TaskContainer) -> tuple[int | None, str] | None:
        """The example's (status, output) after setup, before the agent acts (see the module
        docstring); None where the checks run it live (``live``, or a chain in which the
        example is not first or reads its arguments, which only the checks can give)."""
        record = self.task.record
        checks, example = record["check"] or [], record["example"]
        if self.expected_mode != "snapshot" or not checks or checks[0] is not None:
            return None
        if example is None or _reads_arguments(*example):
            return None
        undo = _may_write(*example)
        if undo:
            container.mark_paths()
        status, output = container.run_script(
            example[0], example[1], (), bounds.SCORE_TIMEOUT_S, trusted_tools=True
        )
        if undo:
            container.remove(container.added_paths())
        return None if status is None else (status, output)

    def _take_booted(self) -> TaskContainer | None:
        thread, self._booting = self._booting, None
        if thread is None:
            return None
        thread.join()
        booted, error = self._booted, self._boot_error
        self._booted, self._boot_error = None, None
        if error is not None:
            raise error
        return booted

    def reset(self) -> StepResult:
        booted = self._take_booted()
        if self.container is not None or booted is None:  # a second reset: a fresh system
            self.close()
            booted = self._boot()
        self.container = booted
        self.finished, self.broken, self.commands, self.events = False, None, 0, []
        info: dict[str, Any] = {"tools": list(TOOLS), "max_rounds": MAX_ROUNDS}
        if self.setup_error is not None:  # AgentBench never starts such a sample
            info["error"] = "the task could not be set up in this system: the episode is over"
            return StepResult(self.task.record["description"], done=True, info=info)
        return StepResult(self.task.record["description"], info=info)

    def step(self, tool: str, argument: str, arguments: dict[str, Any] | None) -> StepResult:
        if self.finished or self.broken or self.setup_error:
            return StepResult("The episode has finished.", done=True)
        if tool == "finish":
            self.finished = True
            return StepResult("Finished.", done=True)
        if tool != "bash":
            return StepResult("", info={"error": f"unknown tool {tool!r}; use bash or finish"})
        command = argument
        if arguments is not None:
            command = arguments.get("script", arguments.get("command", ""))
            if not isinstance(command, str):
                return StepResult("", info={"error": "arguments.script must be a string"})
        if not command.strip():
            return StepResult("", info={"error": "empty command: send one bash command"})
        if self.container is None:
            raise ContainerError("the episode was stepped before reset")
        self.commands += 1
        stopped = self._take_background()
        try:
            result = self.container.bash(command)
        except SessionBroken as exc:  # what the agent did to its system: scored, not retried
            self.broken = str(exc)
            self.events.append({"command": self.commands, "limit": "session_broken"})
            return StepResult("", done=True, info={"error": f"{exc}: the episode is over"})
        observed = self._observe(result)
        if stopped and "error" not in observed.info:
            observed.info["limit"] = "disk"
            observed.info["error"] = (
                "a process left running wrote past the system's disk limit "
                f"({self.limits.disk_mb} MiB, {self.limits.files} files) and was stopped"
            )
        return observed

    def _take_background(self) -> bool:
        """Limits the container enforced between commands, as events; True if any."""
        if self.container is None or not self.container.background:
            return False
        taken, self.container.background[:] = list(self.container.background), []
        for event in taken:
            self.events.append({"command": self.commands, **event, "background": True})
        return True

    def _observe(self, result: CommandResult) -> StepResult:
        info: dict[str, Any] = {"exit_code": result.exit_code}
        if result.limit == "timeout":
            info["limit"] = "timeout"
            info["error"] = (
                f"the command ran past {self.limits.command_timeout_s:g}s and was stopped "
                "(with everything it started)"
            )
        elif result.limit == "disk":
            info["limit"] = "disk"
            info["error"] = (
                f"the command wrote past the system's disk limit ({self.limits.disk_mb} MiB) "
                "and was stopped"
            )
        elif result.limit == "pids":
            info["limit"] = "pids"
            info["error"] = (
                f"no process could start in the system (its limit is {self.limits.pids}): it "
                "was restarted, every process stopped, its files kept"
            )
        elif result.session_ended:
            info["error"] = "the command ended the shell; a new shell was started"
        if result.limit or result.session_ended:
            event: dict[str, Any] = {
                "command": self.commands,
                "limit": result.limit or "shell_ended",
                "seconds": round(result.seconds, 2),
            }
            if result.usage is not None:  # what the stop left, measured after it
                event["mb"], event["files"] = round(result.usage[0], 1), result.usage[1]
            self.events.append(event)
        if result.dropped_bytes:
            info["dropped_bytes"] = result.dropped_bytes
        return StepResult(shape_output(result.output), info=info)

    def close(self) -> None:
        with contextlib.suppress(BaseException):
            booted = self._take_booted()
            if booted is not None:
                booted.close()
        if self.container is not None:
            self.container.close()
            self.container = None
