"""harnessctl's OS verdicts agree with AgentBench v0.2's on the standard split (real task
containers): the gold, a wrong commit and the gold left unfinished, on a stratified subset
(one task of every task file of the split, and every task an issue named: 2.environment.0/1,
4.Q30.*, 4.Q47.0, 4.N4.0, 4.Q09.0). ``benchmarks/os_verdicts.py`` runs all 144 tasks.

The reference is ``tests/helpers/agentbench_os.py`` (AgentBench's judge, rewritten from its
behaviour). The subset's rollouts run two at a time, once for the whole module."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from harnessctl.envs.os_interaction import OSEnvironment
from harnessctl.envs.os_interaction.tasks import load_tasks
from tests.helpers import ROOT
from tests.helpers.agentbench_os import agreement, compare_shell
from tests.helpers.os_env import require_os_image

require_os_image()
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

STANDARD = load_tasks(ROOT / "examples" / "os_interaction" / "standard").by_id()
NAMED = ["2.environment.0", "2.environment.1", "4.Q30.0", "4.Q30.5", "4.Q47.0", "4.N4.0"]
NAMED += ["4.Q09.0", "4.Q30.1", "4.Q30.2", "4.Q30.3", "4.Q30.4"]
#: one task of each other task file, chosen for what it exercises
STRATA = [
    "1.stock.4",  # an example that writes and removes files of its own (snapshot: undone)
    "2.environment.4",  # a bash check that sources the agent's ~/.bashrc
    "3.ac.1",  # getent group (the name service)
    "4.N41.2",  # match
    "4.Q49.0",  # match after a start that sets a variable
    "5.new.2",  # a check that runs the agent's program (date-format)
    "6.new.3",  # finish: a setuid bit the agent must clear (metadata of /usr/bin/find)
    "7.bootstrap.2",  # find -exec stat (a program started by a program of the checks)
]


@pytest.fixture(scope="module")
def verdicts():
    env = OSEnvironment()
    with ThreadPoolExecutor(2) as pool:
        rows = pool.map(lambda t: (t, agreement(env, STANDARD[t])), NAMED + STRATA)
        return {(t, kind): (ours, theirs) for t, found in rows for kind, ours, theirs in found}


def test_the_subset_holds_every_named_task_and_one_of_every_file():
    files = {t.rsplit(".", 1)[0] for t in STANDARD}
    chosen = {t.rsplit(".", 1)[0] for t in NAMED + STRATA}
    assert files - chosen <= {"4.N11", "4.N225", "4.N37", "4.Q19"}, files - chosen


def test_gold_wrong_and_unfinished_agree_with_agentbench(verdicts):
    differ = {
        key: (ours.why, theirs.why)
        for key, (ours, theirs) in verdicts.items()
        if ours.success != theirs.success
    }
    assert not differ, differ
    gold = {task for (task, kind), (ours, _) in verdicts.items() if kind == "gold" and ours.success}
    # the gold passes where AgentBench's does: all but the failed setup of 4.Q09.0
    assert gold == set(NAMED + STRATA) - {"4.Q09.0"}, set(NAMED + STRATA) - gold
    assert not any(ours.success for (_, kind), (ours, _) in verdicts.items() if kind != "gold")


def test_a_failed_setup_is_a_failed_sample_on_both_sides(verdicts):
    ours, theirs = verdicts[("4.Q09.0", "gold")]
    assert not ours.success and not theirs.success
    assert "init script 0 exited 1" in ours.why and "Bad file descriptor" in ours.why


def test_the_agents_shell_after_start_is_agentbenchs():
    """4.N4.0's ``start`` ends in ``su - jack``: the agent is jack in jack's home, as in
    AgentBench's shell; 4.Q47.0's ``cd /home/user2`` leaves it there."""
    env = OSEnvironment()
    for task_id, expected in (
        ("4.N4.0", ["jack", "/home/jack"]),
        ("4.Q47.0", ["root", "/home/user2"]),
    ):
        seen = compare_shell(env, STANDARD[task_id])
        assert seen["harnessctl"] == seen["agentbench"] == expected, seen
