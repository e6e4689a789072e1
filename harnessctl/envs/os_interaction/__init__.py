"""The ``os_interaction`` environment: AgentBench's OS-interaction tasks, host-served.

A task is one record of an AgentBench task file (:mod:`.tasks` reads AgentBench's layout as
it is); its category is its first label. Each rollout gets a task container of its own
(:mod:`.episode`, :mod:`.container`, the offline image of ``scripts/build-os-image.sh``): the
init scripts run first (one that fails is a failed sample, scored, as in AgentBench), the
``start`` script is typed into the agent's shell as AgentBench types it (what it starts keeps
running, a user it becomes is the agent's), and the harness acts through two tools, over the
rollout's gateway socket:

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

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from harnessctl import bounds
from harnessctl.envs import Environment, Episode, ReplayScript, Score, Task, TaskSet

from .container import DEFAULT_IMAGE, ContainerError, Limits, image_id, image_present, reap_orphans
from .episode import (
    EXPECTED_MODES,
    MAX_ROUNDS,
    TOOLS,
    OSEpisode,
    reads_answer,
    shape_output,
)
from .tasks import KIND, RecordError, load_tasks, parse_record, scripts_dir

HERE = Path(__file__).resolve().parent
TASK_FILE = "task.json"
_reaped = threading.Event()


def public_task(task: Task) -> dict[str, Any]:
    """What the sandbox may see of a task (``task.json``): the description, nothing else."""
    return {"task_id": task.id, "env": KIND, "instruction": task.record["description"]}


def _matches(rule: dict[str, str], answer: str | None) -> bool:
    """AgentBench's ``match``: the answer, stripped, equals the expected string as written
    (or the regex finds it in the answer)."""
    if answer is None:
        return False
    if "regex" in rule:
        return re.search(rule["regex"], answer) is not None
    return answer.strip() == rule["answer"]


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
        expected: str = "snapshot",
    ) -> None:
        if not isinstance(image, str) or not image:
            raise ValueError(f"image must be an image name, got {image!r}")
        if expected not in EXPECTED_MODES:
            raise ValueError(
                f"expected must be one of {', '.join(EXPECTED_MODES)} (snapshot: the example's "
                f"output before the agent acts; live: AgentBench's, after), got {expected!r}"
            )
        self.image = image
        #: Where the example's output that checks compare with comes from (:mod:`.episode`)
        self.expected = expected
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
        episode = OSEpisode(task, self.image, self.limits, self.expected)
        episode.boot()
        return episode

    def score(
        self, task: Task, workdir: Path, answer: str | None, episode: Episode | None = None
    ) -> Score:
        """AgentBench's judgement, in the episode's container after the episode: ``match``
        (the answer, stripped, equals the expected string, or the regex finds it) or the
        ``check`` chain: arguments start as ``[str(answer)]``; each check script (``null``:
        the example script, or its output from the snapshot: :mod:`.episode`) runs with them
        and must exit 0, its output appended. Checks run with the read-only copy of the
        image's tools (:mod:`.trusted`): whatever the agent did to the container's programs
        or configuration, its verdict is the checks' own. A task whose setup failed is a
        failed sample (``setup`` in the detail), as in AgentBench."""
        played = episode if isinstance(episode, OSEpisode) else None
        detail: dict[str, Any] = {"answer": answer}
        if played is not None:
            played._take_background()
            detail["events"] = list(played.events)
            detail["init_status"] = list(played.init_status)
            if played.setup_error is not None:
                detail["setup"] = f"failed: {played.setup_error}"
                return Score(success=False, detail={**detail, "checks": "not run: setup failed"})
            if played.broken is not None:
                detail["session"] = f"broken by the agent: {played.broken}"
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
        detail["expected"] = "snapshot" if played.expected is not None else "live"
        for n, script in enumerate(record["check"]):
            if script is None and n == 0 and played.expected is not None:
                status, output = played.expected  # the example before the agent acted
                statuses.append(status)
                if status != 0:
                    return Score(success=False, detail={**detail, "checks": statuses})
                params.append(output)
                continue
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
        return {
            "task_id": task.id,
            "category": task.category,
            "description": record["description"],
            "example": record["example"][1] if record["example"] else None,
            "example_language": record["example"][0] if record["example"] else None,
            "match": (record["match"] or {}).get("answer"),
            "answers": reads_answer(record),
            "background": record["start"] is not None,
        }

    def replay(self, task: Task) -> ReplayScript:
        """The gold as a script for ``replay/os_interaction`` (:mod:`.replay`): the example
        script as a ``bash`` command (for a ``match`` task, which has none, ``ps`` shows the
        background program), then the answer: the match string, or the command's output
        (``"answer_from_output": true``: filled in from the observation at run time) where
        the verdict reads the answer (a check that reads its first argument included: the
        example of 4.Q47 prints the path it asks for), else ``finish``."""
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
            steps.append(
                {
                    "text": "Think: the output is the answer.\n\nAct: answer({output})",
                    "answer_from_output": True,
                }
            )
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
    "ContainerError",
    "OSEnvironment",
    "OSEpisode",
    "load_tasks",
    "public_task",
    "shape_output",
]
