"""The typed, versioned records between stages: trajectories and profiles."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harnessctl.errors import ConfigError, HarnessctlError
from harnessctl.harness import load_harness
from harnessctl.policy import Policy
from harnessctl.records import TRAJECTORY_FORMAT, Profile, Trajectory
from harnessctl.run.session import RolloutSession
from harnessctl.sandbox import Limits
from harnessctl.suite import load_suite
from tests.helpers import BASE_HARNESS, EXAMPLE_SUITE, ROOT
from tests.helpers.openai_stub import OpenAIStub, Reply


def test_a_rollout_leaves_a_versioned_trajectory_without_secrets():
    suite = load_suite(EXAMPLE_SUITE)
    task = suite.tasks("dev").by_id()["dev-004"]
    script = ["Action: Operation\n```sql\nSELECT 1\n```", 'Action: Answer\nFinal Answer: ["1"]']
    with OpenAIStub() as stub:
        stub.push(*(Reply(text) for text in script))
        policy = Policy("openai/stub", {"api_base": stub.url, "api_key": "sk-very-secret"})
        with RolloutSession(suite.environment, limits=Limits(timeout_s=30)) as session:
            rec = session.run(load_harness(BASE_HARNESS), task, 0, policy)
    traj = rec.trajectory
    assert isinstance(traj, Trajectory) and traj.version == TRAJECTORY_FORMAT == 5
    assert list(traj.model_dump())[:2] == ["kind", "version"] and traj.kind == "trajectory"
    assert traj.env == "dbbench" and traj.task_id == "dev-004"
    assert traj.policy.params["api_key"] == "***"
    assert "sk-very-secret" not in traj.model_dump_json()
    assert [c.reply for c in traj.calls] == script
    assert [t["kind"] for t in traj.turns()] == ["tool", "answer"]
    assert traj.steps == []  # an in-sandbox environment
    again = Trajectory.load(traj.model_dump(mode="json"))
    assert again == traj


def test_an_unversioned_trajectory_is_upgraded_and_a_newer_one_refused():
    legacy = {
        "rollout_id": "r",
        "task_id": "t",
        "seed": 0,
        "harness": {"name": "h", "hash": "x"},
        "policy": {"model": "sim/dbbench", "params": {}},
        "outcome": "success",
        "result": {"status": "answered", "answer": "[]", "rounds": 1},
        "score": {"success": True, "answer_unparsable": False, "detail": {}},
        "events": [],
        "calls": [],
        "sandbox": {"exit_code": 0, "timed_out": False, "wall_s": 0.1},
    }
    traj = Trajectory.load(legacy)
    assert traj.version == TRAJECTORY_FORMAT and traj.steps == []
    # written by the previous format (3): the field was ``format_version``, with no kind
    previous = Trajectory.load({**legacy, "format_version": 3, "steps": []})
    assert previous.version == TRAJECTORY_FORMAT and previous.kind == "trajectory"
    assert previous.outcome == "success" and previous.result is not None
    with pytest.raises(HarnessctlError, match="version 99 is newer"):
        Trajectory.load({**legacy, "format_version": 99}, where="x.json.gz")
    with pytest.raises(HarnessctlError, match="version 99 is newer"):
        Trajectory.load({**legacy, "version": 99}, where="x.json.gz")


def test_a_committed_profile_round_trips_through_the_model():
    path = ROOT / "profiles" / "dbbench-base" / "sim-dbbench" / "dbbench-dev.train.yaml"
    data = yaml.safe_load(path.read_text())
    profile = Profile.load(data, where=str(path))
    assert profile.is_base and profile.success.rollouts == 80
    assert profile.dump() == data


def test_a_profile_with_an_unknown_field_is_refused(tmp_path: Path):
    path = ROOT / "profiles" / "dbbench-base" / "sim-dbbench" / "dbbench-dev.train.yaml"
    data = yaml.safe_load(path.read_text())
    with pytest.raises(Exception, match="sucess"):
        Profile.load({**data, "sucess": 1})


def test_a_newer_or_malformed_profile_is_refused_naming_where_and_the_field():
    path = ROOT / "profiles" / "dbbench-base" / "sim-dbbench" / "dbbench-dev.train.yaml"
    data = yaml.safe_load(path.read_text())
    with pytest.raises(ConfigError, match="profile version 2 is newer") as err:
        Profile.load({**data, "version": 2}, where="x.yaml")
    assert err.value.where == "x.yaml: version"
    bad = {**data, "success": {**data["success"], "rate": "high"}}
    with pytest.raises(ConfigError) as err:
        Profile.load(bad, where="x.yaml")
    assert err.value.where == "x.yaml: success.rate"
    with pytest.raises(ConfigError, match="not a harnessctl profile"):
        Profile.load(["a", "list"], where="x.yaml")


def test_a_reanchor_profile_keeps_its_sample_and_a_full_one_has_none():
    path = ROOT / "profiles" / "dbbench-base" / "sim-dbbench" / "dbbench-dev.train.yaml"
    data = yaml.safe_load(path.read_text())
    sample = {"anchor_policy": "sim/dbbench", "sample": ["t1", "t2"]}
    reanchored = Profile.load({**data, "kind": "reanchor", "reanchor": sample})
    assert reanchored.reanchor is not None and reanchored.reanchor.sample == ["t1", "t2"]
    assert reanchored.dump() == {**data, "kind": "reanchor", "reanchor": sample}
    assert "reanchor" not in Profile.load(data).dump()
    with pytest.raises(ConfigError, match="kind"):
        Profile.load({**data, "kind": "partial"})
