"""The verdict as AgentBench decides it: only a run the agent ended is judged, the ``start``
script is typed into the agent's shell (its user and directory are the agent's), a setup that
fails is a failed sample, scored, not an infrastructure error (real task containers)."""

from __future__ import annotations

import json

import pytest

from harnessctl.envs.os_interaction import OSEnvironment
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
        # start's sleep by its whole command line: the stopped `sleep 60` may still be on its
        # way out when this runs (seen under load), and is not what this checks
        alive = played.step("bash", "pgrep -fx 'sleep 300' | wc -l", None).observation
        assert alive.strip() == "1", alive
    finally:
        played.close()


def test_a_failed_setup_is_a_failed_sample_not_an_infra_error(tmp_path):
    """AgentBench records a sample whose init script fails as a failed sample (status
    UNKNOWN, result False): so does harnessctl, through the whole rollout path, and the
    rollout is a scored ``wrong_answer``, never retried as ``infra_error``."""
    from harnessctl.harness import load_harness
    from harnessctl.policy import Policy
    from harnessctl.run.session import RolloutSession
    from harnessctl.sandbox import Limits

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
        first = played.reset()
        assert first.done and "could not be set up" in first.info["error"]
        assert played.step("bash", "echo hi", None).done  # nothing more runs
        score = env.score(task, ROOT, "x", played)
        assert not score.success and score.detail["checks"] == "not run: setup failed"
        assert score.detail["setup"].startswith("failed: init script 0 exited 3: cannot set up")
    finally:
        played.close()
    harness = load_harness(ROOT / "harnesses" / "os-base")
    with RolloutSession(env, sandbox="local", limits=Limits(timeout_s=60)) as session:
        rec = session.run(harness, task, 0, Policy("replay/os_interaction"))
    assert rec.outcome == "wrong_answer", (rec.outcome, rec.error)
    assert rec.trajectory.score.detail["setup"].startswith("failed: init script 0 exited 3")


def test_start_leaves_the_agent_in_its_user_and_directory(tmp_path):
    """``start`` ends in ``su - jack`` (4.N4.0): the agent's shell is jack's, in jack's home,
    as in AgentBench; a command stopped at its time limit gives it a new shell as jack, in
    the same directory."""
    task = _suite(
        tmp_path,
        {
            "description": "Who are you?",
            "start": "useradd -s /bin/bash -d /home/jack -m jack && cd /home/jack && su - jack",
            "evaluation": {"match": "jack"},
        },
    )
    env = OSEnvironment(command_timeout_s=3)
    played = env.open_episode(task, 0)
    played.reset()
    try:
        who = played.step("bash", "id -un; pwd; echo $HOME", None).observation.split()
        assert who == ["jack", "/home/jack", "/home/jack"], who
        played.step("bash", "mkdir -p sub && cd sub", None)
        assert played.step("bash", "sleep 60", None).info["limit"] == "timeout"
        again = played.step("bash", "id -un; pwd; grep Cap /proc/self/status", None)
        lines = again.observation.split("\n")
        assert lines[:2] == ["jack", "/home/jack/sub"], again.observation
        caps = dict(line.split(":\t") for line in lines[2:] if ":\t" in line)
        assert int(caps["CapEff"], 16) == 0, caps  # an ordinary user's shell
        # jack's shell lacks the capability only a check holds, as root's does
        assert not int(caps["CapBnd"], 16) & (1 << 29), caps  # CAP_AUDIT_WRITE
    finally:
        played.close()


def test_the_snapshot_of_the_expected_answer_leaves_the_system_as_setup_left_it():
    """7.bootstrap.52's example creates the directories it counts: run before the agent's
    first command (the snapshot), what it created is removed again, so the agent finds the
    system as AgentBench's setup leaves it (only the main directory the init made)."""
    task = load_tasks(ROOT / "examples" / "os_interaction" / "standard").by_id()["7.bootstrap.52"]
    env = OSEnvironment(command_timeout_s=10)
    played = env.open_episode(task, 0)
    played.reset()
    try:
        assert played.expected == (0, "13\n")  # StudentFiles, 3 classes, 9 projects
        seen = played.step("bash", "find ~/StudentFiles | sort", None).observation
        assert seen.split() == ["/root/StudentFiles"], seen
        assert env.score(task, ROOT, "13", played).success
    finally:
        played.close()
