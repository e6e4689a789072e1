"""The ``miniwob`` environment: MiniWoB++'s web tasks (Shi et al., ICML 2017; Liu et al.,
ICLR 2018; the Farama Foundation's ``miniwob`` package) in a real headless Chromium,
host-served.

A task is one MiniWoB++ task page with a seed (:mod:`.tasks`); the page is MiniWoB++'s own
HTML and JavaScript, as the installed package ships it, and so are the problem it draws, the
moment the episode ends and the reward (``pip install 'harnessctl[miniwob]'``; Debian's
``chromium`` and ``chromium-driver``). Each rollout plays an :class:`.episode.MiniwobEpisode`
in a browser of the process's pool (:mod:`.browser`: one browser per worker, reused, a fresh
page per episode, the pages served read only on loopback, no network, no other file).

The harness sees ``task.json`` (the task's name, no problem yet) and then, at every step, the
utterance and the page as text with element refs (:mod:`.dom`); it acts with MiniWoB++'s
action space as three tools, ``click``, ``type`` and ``press`` (:mod:`.actions`), in text or
as function calls. Score: the page's own raw reward (``WOB_RAW_REWARD_GLOBAL``, time-free)
and its time-scaled one are both recorded; success is the raw reward reaching the threshold
(``env_options: {success_threshold: 1.0}``, MiniWoB++'s thresholded reward), and an episode
that does not end within 30 steps is ``step_limit``. The solutions never enter the sandbox:
``replay/miniwob`` and ``sim/miniwob`` (offline test doubles) read the page the harness shows
them and solve it with the task's own rule (:mod:`.gold`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harnessctl.envs import Environment, Episode, Score, Task, TaskSet

from .actions import TOOLS
from .tasks import CATEGORIES, KIND, load_tasks, make_task

HERE = Path(__file__).resolve().parent
TASK_FILE = "task.json"
#: Steps per rollout. MiniWoB++ limits an episode by time only (10 s of the page's clock,
#: counted here as the page's own time: see .episode); the longest gold of the suite is
#: under 20 actions.
MAX_STEPS = 30


def instruction(task: Task) -> str:
    """The task's instruction before the page is drawn (the utterance comes with the page)."""
    return (
        "Complete the task on the web page. The page and the task's instruction come with "
        "every observation; act on the page's elements by their refs."
    )


def public_task(task: Task) -> dict[str, Any]:
    """What the sandbox may see of a task (``task.json``): its name, no problem, no answer."""
    return {
        "task_id": task.id,
        "env": KIND,
        "miniwob_task": task.record["task"],
        "instruction": instruction(task),
        "tools": list(TOOLS),
    }


class MiniwobEnvironment(Environment):
    """MiniWoB++'s task pages in headless Chromium (see the module docstring)."""

    kind = KIND
    surface = "host"
    tools = TOOLS
    max_steps = MAX_STEPS
    #: Model calls per rollout: the 30 steps and room for re-prompts and refused actions.
    max_calls = 40
    #: Tokens per rollout: 30 turns with the page (~1-3k tokens) and the history in context.
    max_tokens = 400_000
    #: 2: the pages served as UTF-8 and the images their stylesheets name loaded before the
    #: episode (what the agent sees changed: no rollout of version 1 is served for it).
    version = "2"
    directions = HERE / "directions"

    def __init__(self, success_threshold: float = 1.0) -> None:
        if isinstance(success_threshold, bool) or not isinstance(success_threshold, int | float):
            raise ValueError(f"success_threshold must be a number, got {success_threshold!r}")
        if not -1.0 <= float(success_threshold) <= 1.0:
            raise ValueError(f"success_threshold must be in [-1, 1], got {success_threshold}")
        self.success_threshold = float(success_threshold)

    def load_tasks(self, path: Path) -> TaskSet:
        """Every record of the JSON Lines task files under ``path`` (:mod:`.tasks`)."""
        return load_tasks(Path(path))

    def task_from_record(self, record: dict[str, Any], task_id: str | None = None) -> Task:
        """A task from one record (``{"task", "seed", "category"}``), checked."""
        from harnessctl.errors import ConfigError

        from .tasks import RecordError

        try:
            made = make_task(record, "<record>")
        except RecordError as exc:
            raise ConfigError("record", str(exc)) from None
        if task_id is None:
            return made
        return Task(task_id, made.env, made.category, made.record, made.content_hash, made.source)

    def prepare(self, task: Task, workdir: Path) -> None:
        """Write ``task.json`` into ``workdir``."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        text = json.dumps(public_task(task), ensure_ascii=False, indent=2)
        (workdir / TASK_FILE).write_text(text + "\n", encoding="utf-8")

    def open_episode(self, task: Task, seed: int) -> Episode:
        """A fresh episode (its browser is taken at reset). The task's own seed draws the
        problem, so ``seed`` is unused: a task is one reproducible episode. ``ConfigError``
        (the run stops) when MiniWoB++, Selenium or Chromium is missing."""
        from .browser import binaries, html_dir
        from .episode import MiniwobEpisode

        html_dir()
        binaries()
        try:
            import selenium  # noqa: F401
        except ImportError:
            from harnessctl.errors import ConfigError

            raise ConfigError(
                "env", "the miniwob environment needs Selenium: pip install 'harnessctl[miniwob]'"
            ) from None
        return MiniwobEpisode(task, self.max_steps)

    def score(
        self, task: Task, workdir: Path, answer: str | None, episode: Episode | None = None
    ) -> Score:
        """Success: the page's raw reward reached ``success_threshold``. The final answer is
        unused; both rewards, the page's reason and the times are in the detail."""
        from .episode import MiniwobEpisode

        played = episode if isinstance(episode, MiniwobEpisode) else None
        if played is None:
            return Score(success=False, detail={"raw_reward": 0.0, "note": "no episode"})
        success = (
            played.done and played.error is None and played.raw_reward >= self.success_threshold
        )
        return Score(
            success=bool(success),
            detail={
                "raw_reward": played.raw_reward,
                "reward": played.reward,
                "threshold": self.success_threshold,
                "ended": played.done,
                "reason": played.reason,
                "error": played.error,
                "steps": played.steps,
                "page_ms": round(played.page_ms, 3),
                "browser_ms": round(played.browser_ms, 3),
                "time_limit_ms": played.time_limit_ms,
            },
        )

    def oracle(self, task: Task) -> dict[str, Any]:
        """The task's name, seed and category, for the offline test doubles (host only); they
        read the problem from the page the harness shows them."""
        return {
            "task_id": task.id,
            "task": task.record["task"],
            "seed": task.record["seed"],
            "category": task.category,
        }


__all__ = ["CATEGORIES", "KIND", "MAX_STEPS", "MiniwobEnvironment", "public_task"]
