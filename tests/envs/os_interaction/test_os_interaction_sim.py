"""sim/os_interaction: a pure function of (oracle, messages, seed, params); each failure mode
shows under os-base's messages and yields to the message its repair adds (no Docker)."""

from __future__ import annotations

from harnessctl.envs.os_interaction import OSEnvironment
from harnessctl.envs.os_interaction.sim import MODES, next_reply, plan_mode
from harnessctl.envs.os_interaction.tasks import load_tasks
from tests.helpers import ROOT

TASKS = load_tasks(ROOT / "examples" / "os_interaction").by_id()
ORACLE = OSEnvironment().oracle(TASKS["dev.6"])  # answered through the check chain
CALC = OSEnvironment().oracle(TASKS["dev.3"])  # changes the system: finish


def only(mode):
    return {m: (1.0 if m == mode else 0.0) for m in MODES}


def convo(*pairs):
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for reply, feedback in pairs:
        messages.append({"role": "assistant", "content": reply})
        if feedback is not None:
            messages.append({"role": "user", "content": feedback})
    return messages


SHOWN = "The output of the OS:\n\n8\n"


def test_played_right_it_runs_the_example_then_answers_the_shown_output():
    first = next_reply(ORACLE, convo(), 0, only(None))
    assert "Act: bash" in first and ORACLE["example"] in first
    assert next_reply(ORACLE, convo((first, SHOWN)), 0, only(None)).endswith("Act: answer(8)")
    calc = next_reply(CALC, convo(), 0, only(None))
    assert next_reply(
        CALC, convo((calc, "The output of the OS is empty.")), 0, only(None)
    ).endswith("Act: finish")


def test_error_mode_takes_the_error_unless_the_exit_status_is_shown():
    rates = only("error")
    first = next_reply(ORACLE, convo(), 0, rates)
    assert "cd /srv/task &&" in first
    error = "The output of the OS:\n\nbash: cd: /srv/task: No such file or directory\n"
    assert "No such file" in next_reply(ORACLE, convo((first, error)), 0, rates)
    noted = error + "Note: the command failed with exit status 1.\n"
    retry = next_reply(ORACLE, convo((first, noted)), 0, rates)
    assert "/srv/task" not in retry and ORACLE["example"] in retry
    assert next_reply(ORACLE, convo((first, noted), (retry, SHOWN)), 0, rates).endswith(
        "Act: answer(8)"
    )


def test_format_verbose_and_overrun_yield_to_their_repairs():
    first = next_reply(ORACLE, convo(), 0, only("format"))
    prose = next_reply(ORACLE, convo((first, SHOWN)), 0, only("format"))
    assert "Act:" not in prose
    reminder = "Your last reply had no action ... Act: answer(8)"
    fixed = next_reply(ORACLE, convo((first, SHOWN), (prose, reminder)), 0, only("format"))
    assert fixed.endswith("Act: answer(8)")

    verbose = next_reply(ORACLE, convo((first, SHOWN)), 0, only("verbose"))
    assert verbose.endswith("Act: answer(The answer is 8.)")
    asked = "Answer again with only the value, e.g. Act: answer(8)"
    again = next_reply(ORACLE, convo((first, SHOWN), (verbose, asked)), 0, only("verbose"))
    assert again.endswith("Act: answer(8)")

    rerun = next_reply(ORACLE, convo((first, SHOWN)), 0, only("overrun"))
    assert "Act: bash" in rerun
    note = SHOWN + "Note: 3 rounds left. If you already know the answer, answer now\n"
    stop = next_reply(ORACLE, convo((first, SHOWN), (rerun, note)), 0, only("overrun"))
    assert stop.endswith("Act: answer(8)")


def test_modes_are_seeded_per_task_and_skill_only_switches_them_off():
    rates = {m: 0.5 for m in MODES}
    drawn = [plan_mode(t, s, rates) for t in TASKS for s in range(4)]
    assert drawn == [plan_mode(t, s, rates) for t in TASKS for s in range(4)]
    assert set(drawn) == {*MODES, None}
    half = {m: 0.25 for m in MODES}
    for t in TASKS:
        for s in range(4):
            low = plan_mode(t, s, half)
            assert low is None or low == plan_mode(t, s, rates)
