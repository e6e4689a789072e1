"""tau2 with a model-backed user through the whole rollout path: ``harnessctl eval`` on a suite
whose ``env_options`` name a litellm model for the user (``user: openai/gpt-4o-mini`` served by
tests/helpers/openai_stub.py, a real OpenAI-compatible HTTP server on loopback). The agent is
``replay/tau2`` (offline); the user's calls go from the episode on the host through the
rollout's model access to the stub: recorded as ``env:user`` with their cost, apart from the
agent's, outside its budget, and the user's API key stored nowhere. ~15 s."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from harnessctl.workspace import load_workspace
from tests.helpers.cli import cli, cli_json
from tests.helpers.openai_stub import Fail, OpenAIStub
from tests.helpers.workspaces import isolated_workspace

pytestmark = pytest.mark.timeout(300)

try:
    import tau2  # noqa: F401  (the `tau2` extra; .ci/run installs it)
except ImportError:  # CI must run these: it fails there instead of skipping
    if os.environ.get("CI"):
        raise
    pytest.skip("pip install -e '.[tau2]' to run these", allow_module_level=True)

SECRET = "sk-user-model-secret-0451"
USER_MODEL = "openai/gpt-4o-mini"  # a model litellm prices: the user's calls have a cost
OPENING = "Hi, I would like to book a flight, please."
CLOSING = "Thank you, that is all. ###STOP###"


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    with isolated_workspace(tmp_path / "home", root, workers=1):
        yield root


def write_suite(ws: Path, stub: OpenAIStub) -> str:
    """A one-task suite (airline 24: the gold is one booking and a closing message) whose
    user is the stub-served model, its key in ``user_params``."""
    suite = ws / "suites" / "tau2-user"
    (suite / "tasks").mkdir(parents=True)
    (suite / "tasks" / "airline.yaml").write_text("domain: airline\nsplit: test\nids: ['24']\n")
    config = {
        "name": "tau2-user",
        "env": "tau2",
        "tasks": ["tasks"],
        "timeout_s": 300,
        "env_options": {
            "user": USER_MODEL,
            "user_params": {"api_base": stub.url, "api_key": SECRET},
        },
    }
    (suite / "suite.yaml").write_text(yaml.safe_dump(config))
    return str(suite.relative_to(ws))


@pytest.mark.slow
def test_model_user_is_recorded_apart_and_outside_the_agent_budget(ws):
    with OpenAIStub() as stub:
        stub.reply(OPENING, prompt_tokens=900, completion_tokens=12)
        stub.reply(CLOSING, prompt_tokens=1400, completion_tokens=9)
        suite = write_suite(ws, stub)
        # the agent's two calls (the booking, the closing message) fit --max-calls 2; with
        # the user's two the rollout would have made four
        out = cli_json(
            ws,
            *("eval", "tau2-base", "--suite", suite, "--rollouts", 1),
            *("--policy", "replay/tau2", "--max-calls", 2),
        )
        requests = stub.chat_requests
    assert out["summary"]["outcomes"] == {"success": 1}, out["summary"]
    # the user's model was called twice, with its key, from the host, as tau2's user:
    # tau2's simulation guidelines as the system prompt, the agent's messages as the user's
    assert len(requests) == 2
    assert requests[0].headers.get("authorization") == f"Bearer {SECRET}"
    first = requests[0].body or {}
    assert first["model"] == "gpt-4o-mini" and first.get("temperature") == 0
    assert first["messages"][0]["role"] == "system"
    assert "###STOP###" in first["messages"][0]["content"]
    assert first["messages"][-1]["role"] == "user"  # the agent's greeting, roles flipped
    assert "tools" not in first  # airline's user has no tools

    store = load_workspace(ws).open_store()
    (row,) = store.rollouts()
    assert row.success and row.model_calls == 2  # the agent's calls only
    assert row.cost_usd == 0.0  # the agent (an offline double) is free; the user is not
    trajectory = store.trajectory(row)
    assert [c.caller for c in trajectory.calls] == ["agent", "agent"]
    assert [c.caller for c in trajectory.env_calls] == ["env:user", "env:user"]
    assert [c.reply for c in trajectory.env_calls] == [OPENING, CLOSING]
    assert trajectory.env_calls[0].prompt_tokens == 900
    assert all(c.params.get("api_key") == "***" for c in trajectory.env_calls)
    assert trajectory.steps[0].observation == OPENING  # the user's first message
    # the call log: the user's calls under their own purpose, with their cost
    totals = store.call_totals(rollout_id=row.id)
    assert set(totals) == {"policy", "env:user"}, totals
    assert totals["policy"].calls == 2 and totals["env:user"].calls == 2
    expected = (900 + 1400) * 0.15e-6 + (12 + 9) * 0.6e-6  # gpt-4o-mini's litellm prices
    assert totals["env:user"].cost_usd == pytest.approx(expected, rel=0.05)
    user_rows = store.calls(rollout_id=row.id, purpose="env:user")
    assert [r.id for r in user_rows] == [f"{row.id}:env:user:0", f"{row.id}:env:user:1"]
    assert all(SECRET not in (r.params_json or "") for r in user_rows)
    # the key is nowhere in the store: the database, the trajectories
    for path in (ws / ".harnessctl").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in json.dumps(store.trajectory_data(row))
    shown = cli(ws, "show", row.id).stdout
    assert "env:user: 2 model calls of the environment, tokens 2300+21" in shown


@pytest.mark.slow
def test_a_user_model_that_refuses_the_key_stops_the_run_naming_it(ws):
    with OpenAIStub(default=Fail(401, "Incorrect API key provided")) as stub:
        suite = write_suite(ws, stub)
        result = cli(
            ws,
            *("eval", "tau2-base", "--suite", suite, "--rollouts", 1),
            *("--policy", "replay/tau2"),
            code=None,
        )
        refused = len(stub.chat_requests)
    said = result.stdout + (result.stderr if result.stderr_bytes is not None else "")
    assert result.exit_code != 0 and refused == 1, said  # not retried
    assert "env_options" in said and "env:user model openai/gpt-4o-mini" in said, said
    assert SECRET not in said
    store = load_workspace(ws).open_store()
    assert store.rollouts() == []  # no outcome recorded for the harness
    (attempt,) = store.attempts()
    (call,) = store.calls(attempt_id=attempt.id)
    assert (call.purpose, call.status) == ("env:user", "bad_request")
    assert SECRET not in (call.params_json or "") + (call.error or "")
