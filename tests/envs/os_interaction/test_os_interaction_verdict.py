"""The verdict as AgentBench decides it: only a run the agent ended is judged, the ``start``
script runs in the agent's shell, a setup that fails is the environment's failure (real task
containers)."""

from __future__ import annotations

import json

import pytest

from harnessctl.envs.os_interaction import OSEnvironment
from harnessctl.envs.os_interaction.container import ContainerError
from harnessctl.envs.os_interaction.tasks import load_tasks
from tests.helpers import ROOT
from tests.helpers.os_env import require_os_image

require_os_image()
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: dev.3: write `calc`; its check runs `calc` and ignores the answer
CALC = load_tasks(ROOT / "examples" / "os_interaction").by_id()["dev.3"]
GOOD_CALC = (
    "printf '#!/bin/sh\\npython3 -c \"print($*)\"\\n' > /usr/local/bin/calc"
    " && chmod +x /usr/local/bin/calc"
)


@pytest.fixture
def calc_episode():
    env = OSEnvironment(command_timeout_s=20)
    played = env.open_episode(CALC, 0)
    played.reset()
    played.step("bash", GOOD_CALC, None)
    yield env, played
    played.close()


def test_a_run_the_agent_did_not_end_is_not_judged(calc_episode):
    """The round limit or a reply with no action (no answer, no finish) fails the run without
    running the checks, though the system is as the checks want it."""
    env, played = calc_episode
    score = env.score(CALC, ROOT, None, played)
    assert not score.success and score.detail["checks"] == "not run: no answer or finish"
    played.step("finish", "", None)
    assert env.score(CALC, ROOT, None, played).success


def _suite(tmp_path, record):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "dev.json").write_text(json.dumps([record]))
    return load_tasks(tmp_path).by_id()["dev.0"]


def test_the_start_script_runs_in_the_agents_shell(tmp_path):
    task = _suite(
        tmp_path,
        {
            "description": "What is MARK?",
            "start": "export MARK=set-by-start; cd /tmp; sleep 300 &",
            "evaluation": {"match": "set-by-start"},
        },
    )
    env = OSEnvironment(command_timeout_s=3)
    played = env.open_episode(task, 0)
    played.reset()
    try:
        seen = played.step("bash", 'echo "$MARK $PWD ${HX_START:-unmarked}"', None).observation
        assert seen.strip() == "set-by-start /tmp unmarked", seen
        # what start left running survives a command stopped at its time limit
        played.step("bash", "sleep 60", None)
        alive = played.step("bash", "pgrep -x sleep | wc -l", None).observation
        assert alive.strip() == "1", alive
    finally:
        played.close()


def test_a_failed_setup_is_the_environments_failure(tmp_path):
    task = _suite(
        tmp_path,
        {
            "description": "Anything.",
            "create": {"init": {"code": "echo cannot set up >&2; exit 3"}},
            "evaluation": {"match": "x"},
        },
    )
    env = OSEnvironment()
    played = env.open_episode(task, 0)
    try:
        with pytest.raises(ContainerError, match=r"dev.0: its setup \(init script 0\) exited 3"):
            played.reset()
    finally:
        played.close()
