"""The agent loop and the base harness's hooks, in-process with a scripted model.

The sandboxed path (the same code in a subprocess, through the gateway) is covered by
tests/cli/test_eval_cli.py; here each hook decision is checked on its own."""

import json
import sqlite3
import sys

import pytest

import harnessctl.runtime as rt
from harnessctl.runtime.boot import load_harness
from harnessctl.runtime.client import BudgetExceeded
from harnessctl.runtime.loop import EventLog, run_episode
from tests.helpers import BASE_HARNESS

sys.modules.setdefault("harnessctl_runtime", rt)


class Script:
    """A model that answers from a list; records the messages it was shown."""

    def __init__(self, *replies):
        self.replies = list(replies)
        self.seen = []

    def chat(self, messages, **params):
        self.seen.append(messages)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return type("Reply", (), {"content": reply})()


@pytest.fixture
def task_dir(tmp_path, dbbench_runtime):
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    conn.execute("CREATE TABLE `Game Schedule` (`Game` TEXT, `Opponent` TEXT)")
    conn.executemany("INSERT INTO `Game Schedule` VALUES (?, ?)", [("1", "Athlone Town")] * 900)
    conn.commit()
    conn.close()
    task = {
        "task_id": "t1",
        "env": "dbbench",
        "instruction": "How many games?",
        "context": "The name of this table is Game Schedule.",
        "table_name": "Game Schedule",
        "database": "db.sqlite",
    }
    (tmp_path / "task.json").write_text(json.dumps(task))
    return tmp_path


def run(task_dir, model):
    harness = load_harness(
        BASE_HARNESS,
        task_dir,
        {"entry": "harness.py:DBBenchHarness", "settings": {"max_rounds": 4}},
    )
    state = rt.State(
        task=json.loads((task_dir / "task.json").read_text()), max_rounds=harness.max_rounds
    )
    log = EventLog(task_dir / "events.jsonl")
    run_episode(harness, state, model, log)
    log.close()
    return state


SQL = "Action: Operation\n```sql\nSELECT COUNT(*) FROM `Game Schedule`\n```"


def test_sql_then_answer(task_dir):
    model = Script(SQL, 'Action: Answer\nFinal Answer: ["900"]')
    state = run(task_dir, model)
    assert state.status == "answered"
    assert state.answer == '["900"]'
    assert state.turns[0].feedback == "[(900,)]"
    assert model.seen[1][-1] == {"role": "user", "content": "[(900,)]"}
    # AgentBench's instructions are the first user turn, answered by its injected "Ok."
    assert model.seen[0][0]["role"] == "user" and "Final Answer" in model.seen[0][0]["content"]
    assert model.seen[0][1] == {"role": "assistant", "content": "Ok."}
    kinds = [json.loads(x)["event"] for x in (task_dir / "events.jsonl").read_text().splitlines()]
    assert kinds == ["turn", "turn"]


def test_unparsable_reply_ends_the_base_episode(task_dir):
    state = run(task_dir, Script("I think I should look at the table first."))
    assert state.status == "invalid_format"
    assert state.round == 1


def test_tool_errors_are_shown_raw_and_counted(task_dir):
    bad = "Action: Operation\n```sql\nSELECT * FROM game_schedule\n```"
    state = run(task_dir, Script(bad, bad, bad, bad))
    assert state.status == "step_limit"
    assert state.tool_error_streak == 4
    assert state.turns[0].feedback == "no such table: game_schedule"


def test_long_observations_are_cut_at_the_protocol_limit(task_dir):
    whole = "Action: Operation\n```sql\nSELECT * FROM `Game Schedule`\n```"
    state = run(task_dir, Script(whole, "Action: Answer\nFinal Answer: []"))
    text = state.turns[0].feedback
    assert text.endswith("[TRUNCATED]") and len(text) == 800 + len("[TRUNCATED]")


def test_budget_exhaustion_is_a_context_limit(task_dir):
    state = run(task_dir, Script(SQL, BudgetExceeded("over budget")))
    assert state.status == "context_limit"
    assert len(state.turns) == 1
