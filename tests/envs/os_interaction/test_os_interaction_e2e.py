"""os_interaction end to end: replay/os_interaction through the whole rollout path
(`harnessctl eval os-base --policy replay/os_interaction`), and the scorer refusing a wrong
answer and an untouched system (real task containers)."""

from __future__ import annotations

import pytest

from harnessctl.envs.os_interaction import OSEnvironment
from harnessctl.envs.os_interaction.tasks import load_tasks
from tests.helpers import ROOT
from tests.helpers.cli import cli_json
from tests.helpers.os_env import require_os_image
from tests.helpers.workspaces import isolated_workspace

require_os_image()
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SUITE = ROOT / "examples" / "os_interaction"
#: The one dev task that AgentBench's own scoring cannot pass: `du -sh` prints "8.0K" and
#: check/size-match.py reads it with int("8.0") (docs/os_interaction.md).
UNPASSABLE = {"dev.8"}


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("os") / "ws"
    with isolated_workspace(tmp_path_factory.mktemp("home"), root, workers=2):
        yield root


def test_replay_passes_the_dev_split_through_the_rollout_path(ws):
    out = cli_json(
        ws, "eval", "os-base", "--suite", SUITE, "--policy", "replay/os_interaction",
        "--rollouts", 1,
    )  # fmt: skip
    summary = out["summary"]
    assert summary["tasks"] == 26
    rows = cli_json(ws, "rollouts", "--harness", "os-base")["rollouts"]
    failed = {r["task"]: r["outcome"] for r in rows if not r["success"]}
    assert summary["successes"] >= 24, failed
    assert set(failed) <= UNPASSABLE, failed


@pytest.fixture(scope="module")
def tasks():
    return load_tasks(SUITE).by_id()


def _play(task, commands, answer=None, finish=False):
    env = OSEnvironment(command_timeout_s=10)
    episode = env.open_episode(task, 0)
    try:
        episode.reset()
        outputs = [episode.step("bash", c, None).observation for c in commands]
        if finish:
            assert episode.step("finish", "", None).done
        return env.score(task, SUITE, answer, episode), outputs
    finally:
        episode.close()


def test_a_wrong_answer_fails_and_the_right_one_passes(tasks):
    # the check chain: the example (`ls -a /home | grep "^\." | wc -l`: six files, . and ..)
    hidden = tasks["dev.6"]
    assert _play(hidden, [], "8")[0].success
    assert not _play(hidden, [], "6")[0].success
    assert not _play(hidden, [], "six")[0].success
    assert not _play(hidden, [], None)[0].success
    interval = tasks["dev.4"]  # match
    assert _play(interval, [], " 3\n")[0].success
    assert not _play(interval, [], "1")[0].success


def test_an_untouched_system_fails_and_the_example_passes(tasks):
    calc = tasks["dev.3"]
    assert not _play(calc, [], finish=True)[0].success
    example = calc.record["example"][1]
    assert _play(calc, [example], finish=True)[0].success


def test_the_start_program_runs_in_the_background_for_the_episode(tasks):
    task = tasks["dev.0"]  # writes 'succeed' into /root/log every second
    _, (first, procs, second) = _play(
        task, ["sleep 1.5; wc -c < /root/log", "sleep 2; ps -eo args", "wc -c < /root/log"], "1"
    )
    assert "python3 -c import time" in procs
    assert int(second) > int(first)


def test_evolve_on_the_offline_defaults_accepts_two_directions(ws):
    """The README's command: `harnessctl evolve os-base --suite examples/os_interaction`
    (sim/os_interaction, the rule-based editor)."""
    out = cli_json(
        ws, "evolve", "os-base", "--suite", SUITE, "--gate", "same-batch"
    )  # CI time: see docs/decisions.md
    accepted = set(out["best"])
    assert len(accepted) >= 2, out["edits"]
    assert accepted <= {"format-validation", "error-recovery", "answer-format", "stop-when-known"}
