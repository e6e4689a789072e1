"""The ``os_interaction`` environment: AgentBench's OS-interaction tasks, host-served.

A task is one record of an AgentBench task file (:mod:`.tasks` reads AgentBench's layout as
it is); its category is its first label. Each rollout gets a task container of its own
(:mod:`.container`, the offline image of ``scripts/build-os-image.sh``): the init scripts run
first (one that fails is the environment's failure), the ``start`` script runs in the agent's
shell as AgentBench runs it (what it starts keeps running), and the harness acts through two
tools, over the rollout's gateway socket:

- ``bash``: one command, run in the container's shell session (working directory and
  variables persist), stopped at the per-command time limit; the observation is its output,
  truncated as AgentBench truncates it (``info``: ``exit_code``; ``error`` and ``limit`` when
  it was stopped at a limit);
- ``finish``: ends the episode without an answer (a task that asked to change the system).

An answer is the harness's final answer (the runtime's ``answer`` action). After the episode,
the host scores it in the same container as AgentBench does (:meth:`OSEnvironment.score`).
The sandbox sees ``task.json`` (the description) and the observations; the check and example
scripts never leave the host (``oracle`` and ``replay`` hand them to offline test doubles
only).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from harnessctl import bounds
from harnessctl.envs import Environment, Episode, ReplayScript, Score, StepResult, Task, TaskSet

from .container import (
    DEFAULT_IMAGE,
    CommandResult,
    ContainerError,
    Limits,
    TaskContainer,
    image_id,
    image_present,
    reap_orphans,
)
from .tasks import KIND, RecordError, load_tasks, parse_record, scripts_dir

HERE = Path(__file__).resolve().parent
TASK_FILE = "task.json"
TOOLS = ("bash", "finish")
#: AgentBench's protocol: at most 8 rounds.
MAX_ROUNDS = 8
#: AgentBench cuts a command's output at 800 characters: the first 780 and this note.
OUTPUT_LIMIT = 800
OUTPUT_KEEP = 780
TRUNCATED_NOTE = "\n[truncated because the output is too long]"
INIT_TIMEOUT_S = 60.0
_reaped = threading.Event()


def public_task(task: Task) -> dict[str, Any]:
    """What the sandbox may see of a task (``task.json``): the description, nothing else."""
    return {"task_id": task.id, "env": KIND, "instruction": task.record["description"]}


def shape_output(text: str) -> str:
    """AgentBench's truncation of a command's output."""
    if len(text) > OUTPUT_LIMIT:
        return text[:OUTPUT_KEEP] + TRUNCATED_NOTE
    return text


class OSEpisode(Episode):
    """One task container for one rollout (host only; see harnessctl.envs.Episode).

    ``events`` (host only, in the score's detail) records every command stopped at a limit
    (``timeout``, ``disk``) and every command that ended the shell."""

    def __init__(self, task: Task, image: str, limits: Limits) -> None:
        self.task = task
        self.image = image
        self.limits = limits
        self.container: TaskContainer | None = None
        self.finished = False
        self.commands = 0
        self.events: list[dict[str, Any]] = []
        self.init_status: list[int | None] = []
        self._booting: threading.Thread | None = None
        self._booted: tuple[TaskContainer, list[int | None]] | None = None
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

    def _boot(self) -> tuple[TaskContainer, list[int | None]]:
        container = TaskContainer(self.image, self.limits)
        try:
            container.start()
            statuses: list[int | None] = []
            for n, (language, code) in enumerate(self.task.record["init"]):
                status, output = container.run_script(language, code, timeout=INIT_TIMEOUT_S)
                statuses.append(status)
                if status != 0:  # the task cannot be judged: the environment's failure
                    raise ContainerError(
                        f"task {self.task.id}: its setup (init script {n}) "
                        + ("did not finish" if status is None else f"exited {status}")
                        + f": {output.strip()[-300:]}"
                    )
            start = self.task.record["start"]
            if start is not None:
                container.run_start(start[1])
        except BaseException:
            container.close()
            raise
        return container, statuses

    def _take_booted(self) -> tuple[TaskContainer, list[int | None]] | None:
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
        self.container, self.init_status = booted
        self.finished, self.commands, self.events = False, 0, []
        info = {"tools": list(TOOLS), "max_rounds": MAX_ROUNDS}
        return StepResult(self.task.record["description"], info=info)

    def step(self, tool: str, argument: str, arguments: dict[str, Any] | None) -> StepResult:
        if self.finished:
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
        result = self.container.bash(command)
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
        text = result.output
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
            self.events.append(
                {
                    "command": self.commands,
                    "limit": result.limit or "shell_ended",
                    "seconds": round(result.seconds, 2),
                }
            )
        if result.dropped_bytes:
            info["dropped_bytes"] = result.dropped_bytes
        return StepResult(shape_output(text), info=info)

    def close(self) -> None:
        with contextlib.suppress(BaseException):
            booted = self._take_booted()
            if booted is not None:
                booted[0].close()
        if self.container is not None:
            self.container.close()
            self.container = None


def _matches(rule: dict[str, str], answer: str | None) -> bool:
    if answer is None:
        return False
    if "regex" in rule:
        return re.search(rule["regex"], answer) is not None
    return answer.strip() == rule["answer"].strip()


class OSEnvironment(Environment):
    """AgentBench's OS-interaction tasks (see the module docstring)."""

    kind = KIND
    surface = "host"
    #: ``bash`` (one command) and ``finish`` (end without an answer).
    tools = TOOLS
    #: Commands per rollout: AgentBench's 8 rounds.
    max_steps = MAX_ROUNDS
    #: Model calls per rollout: the 8 rounds and room for re-prompts.
    max_calls = 12
    max_tokens = 60_000
    #: A salt of the cache identity, which already holds this package's sources (its
    #: verdict rules) and the task image's id (:meth:`outcome_inputs`).
    version = "2"
    #: Repair directions for os_interaction harnesses, with the rule-based editor's repairs.
    directions = HERE / "directions"

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        command_timeout_s: float = 20.0,
        pids: int = 256,
        memory_mb: int = 512,
        disk_mb: int = 256,
        files: int = 20_000,
    ) -> None:
        if not isinstance(image, str) or not image:
            raise ValueError(f"image must be an image name, got {image!r}")
        self.image = image
        self.limits = Limits(
            command_timeout_s=float(command_timeout_s),
            pids=int(pids),
            memory_mb=int(memory_mb),
            disk_mb=int(disk_mb),
            files=int(files),
        )

    def outcome_inputs(self) -> dict[str, str]:
        """The task image's id: its userland decides what the checks see (a rebuilt image
        with other packages is another environment). ``unavailable`` without an engine or
        the image (then nothing can run, and no rollout is served under a real id)."""
        return {"image": image_id(self.image) or "unavailable"}

    def load_tasks(self, path: Path) -> TaskSet:
        """Every record under ``path`` (AgentBench's layout; see :mod:`.tasks`)."""
        return load_tasks(Path(path))

    def task_from_record(self, record: dict[str, Any], task_id: str | None = None) -> Task:
        """A raw AgentBench record (scripts inline: ``code``, not ``file``)."""
        from harnessctl.errors import ConfigError

        from .tasks import content_hash

        try:
            parsed = parse_record(record, scripts_dir(Path("data") / "inline.json"))
        except RecordError as exc:
            raise ConfigError("record", str(exc)) from None
        digest = content_hash(parsed)
        labels = parsed["labels"]
        return Task(
            id=task_id or digest[:12],
            env=KIND,
            category=labels[0] if labels else "task",
            record=parsed,
            content_hash=digest,
            source="(record)",
        )

    def prepare(self, task: Task, workdir: Path) -> None:
        """Write ``task.json`` (the description) into ``workdir``; no scripts."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        text = json.dumps(public_task(task), ensure_ascii=False, indent=2)
        (workdir / TASK_FILE).write_text(text + "\n", encoding="utf-8")

    def open_episode(self, task: Task, seed: int) -> OSEpisode:
        """A task container for one rollout (started at reset; ``seed`` is unused: the task's
        own randomness, e.g. ``$RANDOM`` in an init script, is the container's)."""
        from harnessctl.errors import ConfigError

        if not image_present(self.image):
            raise ConfigError(
                "image", f"task image {self.image!r} not found: run scripts/build-os-image.sh"
            )
        if not _reaped.is_set():  # once per process: containers of runs that were killed
            _reaped.set()
            reap_orphans()
        episode = OSEpisode(task, self.image, self.limits)
        episode.boot()
        return episode

    def score(
        self, task: Task, workdir: Path, answer: str | None, episode: Episode | None = None
    ) -> Score:
        """AgentBench's judgement, in the episode's container after the episode: ``match``
        (the answer, stripped, equals the expected string, or the regex finds it) or the
        ``check`` chain: arguments start as ``[str(answer)]``; each check script (``null``:
        the example script) runs with them and must exit 0, its output appended. Checks run
        with the read-only copy of the image's tools (:mod:`.trusted`): whatever the agent did
        to the container's programs, its verdict is the checks' own."""
        played = episode if isinstance(episode, OSEpisode) else None
        detail: dict[str, Any] = {"answer": answer}
        if played is not None:
            played._take_background()
            detail["events"] = list(played.events)
            detail["init_status"] = list(played.init_status)
        record = task.record
        if record["match"] is not None:
            ok = _matches(record["match"], answer)
            return Score(success=ok, detail=detail)
        if answer is None and not (played is not None and played.finished):
            # AgentBench judges only a run the agent ended (an answer or finish): a run cut
            # at the round limit or by a reply with no action fails without checking
            return Score(success=False, detail={**detail, "checks": "not run: no answer or finish"})
        if played is None or played.container is None:
            return Score(success=False, detail={**detail, "checks": "no task container"})
        params = [str(answer)]
        if "\x00" in params[0]:  # no program argument can hold one: the agent's failure
            return Score(success=False, detail={**detail, "checks": "the answer holds a NUL byte"})
        statuses: list[int | None] = []
        deadline = time.monotonic() + bounds.SCORE_TIMEOUT_S
        for script in record["check"]:
            language, code = script if script is not None else record["example"]
            left = deadline - time.monotonic()
            if left <= 0:
                raise bounds.ScoringLimit(f"checks ran past {bounds.SCORE_TIMEOUT_S:g}s")
            status, output = played.container.run_script(
                language, code, tuple(params), left, trusted_tools=True
            )
            if status is None:
                raise bounds.ScoringLimit(f"checks ran past {bounds.SCORE_TIMEOUT_S:g}s")
            statuses.append(status)
            if status != 0:
                return Score(success=False, detail={**detail, "checks": statuses})
            params.append(output)
        return Score(success=True, detail={**detail, "checks": statuses})

    def oracle(self, task: Task) -> dict[str, Any]:
        """The task with its example and expected answer, for offline test doubles (host)."""
        record = task.record
        checks = record["check"] or []
        return {
            "task_id": task.id,
            "category": task.category,
            "description": record["description"],
            "example": record["example"][1] if record["example"] else None,
            "example_language": record["example"][0] if record["example"] else None,
            "match": (record["match"] or {}).get("answer"),
            "answers": record["match"] is not None or any(c is None for c in checks),
            "background": record["start"] is not None,
        }

    def replay(self, task: Task) -> ReplayScript:
        """The gold as a script for ``replay/os_interaction`` (:mod:`.replay`): the example
        script as a ``bash`` command (for a ``match`` task, which has none, ``ps`` shows the
        background program), then the answer: the match string, or the command's output
        (``"answer_from_output": true``: filled in from the observation at run time), or
        ``finish`` when the checks read the system, not an answer."""
        view = self.oracle(task)
        command = view["example"]
        if command is None or view["example_language"] != "bash":
            command = "ps -eo pid,args"
        steps: ReplayScript = [
            {
                "text": f"Think: let me run the reference commands.\n\nAct: bash\n\n"
                f"```bash\n{command}\n```",
                "tool_call": {"name": "bash", "arguments": {"script": command}},
            }
        ]
        if view["match"] is not None:
            steps.append({"text": f"Think: I know the answer.\n\nAct: answer({view['match']})"})
        elif view["answers"]:
            steps.append({"text": "Act: answer({output})", "answer_from_output": True})
        else:
            steps.append(
                {
                    "text": "Think: the system is set up.\n\nAct: finish",
                    "tool_call": {"name": "finish", "arguments": {}},
                }
            )
        return steps


__all__ = [
    "KIND",
    "MAX_ROUNDS",
    "TOOLS",
    "OSEnvironment",
    "OSEpisode",
    "load_tasks",
    "public_task",
    "shape_output",
]
