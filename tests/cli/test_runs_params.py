"""``runs`` and ``show RUN`` print a run's policy readably (issue #56): ``sim/dbbench
skill=0.8``, credentials redacted, the identity hash kept in ``--json`` and beside the label."""

from __future__ import annotations

import json

from harnessctl.policy import Policy, policy_label
from harnessctl.store import RunRow
from harnessctl.workspace import load_workspace
from tests.helpers.cli import eval_json, invoke

KEY = "sk-abcdefghijklmnopqrstuvwx"


def unfolded(result) -> str:
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


def test_runs_and_show_print_the_policy_params_never_a_key(workspace):
    params = ["--param", "skill=0.8", "--param", f"api_key={KEY}", "--model-timeout", "30"]
    _, ran = eval_json("dbbench-base", "--task", "dev-000", "--rollouts", 1, *params)
    identity = Policy("sim/dbbench", {"skill": 0.8}).id
    assert ran["policy"] == identity  # the hash of the params, the key left out
    listed = unfolded(invoke("runs"))
    assert "sim/dbbench skill=0.8" in listed and identity not in listed
    data = json.loads(invoke("runs", "--json").stdout)
    assert data["version"] == 3
    (run,) = data["runs"]
    assert run["policy"] == identity and run["policy_params"] == {"skill": 0.8}  # no timeout
    shown = unfolded(invoke("show", run["id"][:8]))
    assert f"policy sim/dbbench skill=0.8 (identity {identity})" in shown
    assert f"run {run['id']} eval done" in shown and "rollouts 1" in shown
    raw = json.loads(invoke("show", run["id"], "--json").stdout)
    assert (raw["kind"], raw["version"], raw["run"], raw["children"]) == ("run", 1, run, [])
    for out in (listed, shown, json.dumps(data)):
        assert KEY not in out


def test_a_key_stored_with_an_older_run_is_redacted(workspace):
    """A run row from before credentials were split off the policy (or written by another
    tool) holds its key in the params: shown as ``***``, never as it is."""
    store = load_workspace(workspace).open_store()
    stored = {"temperature": 0, "api_key": KEY, "harnessctl:model_timeout_s": 9}
    store.start_run(
        RunRow(id="old00001", command="eval", policy_id="openai/m#0123456789",
               params_json=json.dumps(stored))
    )  # fmt: skip
    listed = unfolded(invoke("runs"))
    assert "openai/m api_key=*** temperature=0" in listed and KEY not in listed
    shown = unfolded(invoke("show", "old00001"))
    assert "policy openai/m api_key=*** temperature=0" in shown and KEY not in shown


def test_a_label_quotes_what_would_not_read_back_and_cuts_long_values():
    assert policy_label("m", {}) == "m"
    label = policy_label("m", {"stop": ["a b"], "name": "x y", "top_p": 0.9, "s": ""})
    assert label == 'm name="x y" s="" stop=["a b"] top_p=0.9'
    schema = {"type": "json_schema", "json_schema": {"name": "harness_edits", "schema": {}}}
    cut = policy_label("m", {"response_format": schema}).split("=", 1)[1]
    assert len(cut) == 40 and cut.endswith("...")
