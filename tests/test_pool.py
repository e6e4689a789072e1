"""The frozen pool end to end on the embedded default: evolve -> profile -> export-pool ->
verify -> load -> rescue sampler / rescue-sim; endpoint rollouts; tamper detection."""

import json
import os
import subprocess
import sys

import pytest

from harnessctl.pool import EndpointPolicy, Pool, PoolIntegrityError, rescue_group
from harnessctl.suite import load_suite
from harnessctl.workspace import init_workspace
from tests.openai_stub import OpenAIStub, Reply

DIRECTIONS = "execution-recovery,context-construction,observation-shaping"


def cli(ws, *args, ok=True):
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", *map(str, args)],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if ok:
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    ws = tmp_path_factory.mktemp("pool") / "ws"
    init_workspace(ws)
    evolved = json.loads(
        cli(
            ws,
            "evolve",
            "dbbench-base",
            "--directions",
            DIRECTIONS,
            "--rounds",
            1,
            "--rollouts",
            2,
            "--json",
        ).stdout
    )
    names = ["dbbench-base", *sorted(v["name"] for v in evolved["best"].values())]
    assert len(names) >= 3
    cli(ws, "profile", *names, "--split", "train", "--rollouts", 2)
    out = ws.parent / "exported" / "dbbench-pool"
    cli(ws, "export-pool", "--name", "dbbench-pool", "--out", out)
    return ws, out, names


def test_export_verify_load_and_manifest(exported):
    ws, out, names = exported
    assert (out.parent / "dbbench-pool.tar.gz").is_file()
    assert "all checksums match" in cli(ws, "pool", "verify", out).stdout
    manifest = json.loads((out / "pool.json").read_text())
    assert manifest["schema_version"] == 1 and manifest["name"] == "dbbench-pool"
    assert sorted(h["name"] for h in manifest["harnesses"]) == sorted(names)
    roles = {h["name"]: h["role"] for h in manifest["harnesses"]}
    assert roles["dbbench-base"] == "base" and list(roles.values()).count("base") == 1
    for h in manifest["harnesses"]:
        assert len(h["git_commit"]) == 40 and h["profile"]["success"] is not None
        if h["role"] == "aux":
            assert h["parent"] == "dbbench-base" and h["direction"]
    with Pool.load(out) as pool:
        assert pool.id == manifest["pool_id"]
    with Pool.load(out.parent / "dbbench-pool.tar.gz") as pool:  # the single-file archive
        assert sorted(pool.names) == sorted(names)


def test_rescue_sampler_and_rescue_sim(exported):
    ws, out, _ = exported
    report = json.loads(
        cli(ws, "rescue-sim", out, "--split", "test", "--group-size", 3, "--json").stdout
    )
    assert report["groups"] == 20
    assert report["all_fail"] > 0 and report["rescued"] > 0
    assert sum(report["by_harness"].values()) > 0
    assert report["extra_rollouts"] == 3 * sum(1 for t in report["tasks"] if t["routed"])
    # the rule through the library: an all-fail group is re-rolled, a mixed one is kept
    task_id = next(t["task_id"] for t in report["tasks"] if t["replaced"])
    suite = load_suite(ws / "examples" / "dbbench")
    task = suite.tasks("test").by_id()[task_id]
    from harnessctl.policy import Policy

    policy = Policy("sim/dbbench")
    with Pool.load(out) as pool:
        group = [pool.base.rollout(task, policy, seed=s) for s in range(3)]
        assert not any(r.success for r in group)
        result = rescue_group(pool, task, group, policy, k=2, seed=1000)
        again = rescue_group(pool, task, group, policy, k=2, seed=1000)
        kept = rescue_group(
            pool, task, [*group[:2], type("R", (), {"success": True})()], policy, k=2
        )
    assert result.replaced and any(r.success for r in result.group)
    assert {r.harness for r in result.group} <= set(result.routed)
    assert [r.outcome for r in again.group] == [r.outcome for r in result.group]  # seeded
    assert not kept.replaced and kept.reason.startswith("group has a success")


def test_endpoint_policy_rollout_records_usage(exported):
    _, out, _ = exported
    record = json.loads(
        (out.parent.parent / "ws" / "examples" / "dbbench" / "dev.jsonl")
        .read_text()
        .splitlines()[4]
    )
    replies = [
        "Action: Operation\n```sql\nSELECT COUNT(*) FROM `Game Schedule`\n```",
        'Action: Answer\nFinal Answer: ["1.0"]',
    ]
    with OpenAIStub() as stub, Pool.load(out) as pool:
        stub.push(*(Reply(r, prompt_tokens=120, completion_tokens=15) for r in replies))
        policy = EndpointPolicy(stub.url, "trainer-ckpt", {"temperature": 1.0})
        result = pool.harness("dbbench-base").rollout(record, policy, seed=3)
        assert stub.chat_requests[0].body["temperature"] == 1.0
    assert [u["prompt_tokens"] for u in result.usage] == [120, 120]
    assert result.outcome in ("success", "wrong_answer") and result.harness == "dbbench-base"
    assert result.messages[-1] == {"role": "assistant", "content": replies[1]}
    assert len(result.harness_hash) == 64


def test_tampering_is_detected_and_named(exported, tmp_path):
    import shutil

    ws, out, names = exported
    copy = tmp_path / "p"
    shutil.copytree(out, copy)
    aux = next(n for n in names if n != "dbbench-base")
    target = copy / "harnesses" / aux / "harness.py"
    target.write_text(target.read_text() + "\n# tampered\n")
    proc = cli(ws, "pool", "verify", copy, ok=False)
    assert proc.returncode == 1 and str(target) in proc.stderr
    with pytest.raises(PoolIntegrityError) as err:
        Pool.load(copy)
    assert str(target) in str(err.value)
    shutil.copytree(out, tmp_path / "q")
    (tmp_path / "q" / "profiles" / "extra.json").write_text("{}")
    with pytest.raises(PoolIntegrityError, match="extra.json"):
        Pool.load(tmp_path / "q")


def test_export_refuses_uncommitted_harness_changes(exported, tmp_path):
    ws, _, names = exported
    aux = next(n for n in names if n != "dbbench-base")
    target = ws / "harnesses" / aux / "prompts" / "system.md"
    original = target.read_text()
    target.write_text(original + "\nuncommitted\n")
    try:
        proc = cli(ws, "export-pool", "dbbench-base", aux, "--out", tmp_path / "p2", ok=False)
    finally:
        target.write_text(original)
    assert proc.returncode != 0
    assert "uncommitted changes" in proc.stderr and aux in proc.stderr
    assert not (tmp_path / "p2").exists()
