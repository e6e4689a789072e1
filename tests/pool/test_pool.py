"""The frozen pool end to end on the embedded default: evolve -> profile -> export-pool ->
verify -> load -> rescue sampler / rescue-sim; endpoint rollouts; tamper detection."""

import json

import pytest

from harnessctl.pool import EndpointPolicy, Pool, PoolIntegrityError, rescue_group
from harnessctl.suite import load_suite
from tests.helpers.openai_stub import OpenAIStub, Reply
from tests.helpers.pools import (
    DBB_REPLIES,
    END,
    cli,
    dbbench_record,
    pool_of_world,
    toy_ids,
    toy_prompt,
    vllm_reply,
)

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")


@pytest.fixture(scope="module")
def exported(dbbench_world, tmp_path_factory):
    return pool_of_world(tmp_path_factory.mktemp("pool"), dbbench_world)


def test_export_verify_load_and_manifest(exported):
    ws, out, names = exported
    assert (out.parent / "dbbench-pool.tar.gz").is_file()
    assert "all checksums match" in cli(ws, "pool", "verify", out).stdout
    manifest = json.loads((out / "pool.json").read_text())
    assert manifest["version"] == 3 and manifest["name"] == "dbbench-pool"
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
    proc = cli(ws, "rescue-sim", out, "--split", "test", "--group-size", 3, "--json")
    report = json.loads(proc.stdout)  # stdout is pure JSON; progress is on stderr
    # with --json, progress is one JSON object a line on stderr
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert events[0]["kind"] == "progress" and events[0]["what"] == "tasks"
    assert (events[0]["done"], events[-1]["done"], events[-1]["total"]) == (0, 20, 20)
    with Pool.load(out) as pool:  # the routing evidence's split, said when it is this one
        splits = {p.split for p in pool.profiles().values()}
    assert ("IN-SAMPLE" in proc.stderr) == ("test" in splits), (splits, proc.stderr[-500:])
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
        result = rescue_group(pool, task, group, policy, k=2, seed=1000, mix="replace")
        again = rescue_group(pool, task, group, policy, k=2, seed=1000, mix="replace")
        mixed = rescue_group(pool, task, group, policy, k=2, seed=1000)  # keep-failures
        kept = rescue_group(
            pool, task, [*group[:2], type("R", (), {"success": True})()], policy, k=2
        )
    assert result.replaced and any(r.success for r in result.group)
    assert result.rows == [0, 1, 2] and {r.harness for r in result.group} <= set(result.routed)
    # the default mix re-rolls rows 0 and 1 only (the same slots: harness and seed) and
    # keeps row 2's base failure beside them
    assert [(r.harness, r.outcome) for r in mixed.attempted] == [
        (r.harness, r.outcome) for r in result.attempted[:2]
    ]
    assert mixed.replaced == any(r.success for r in mixed.attempted)
    if mixed.replaced:
        assert mixed.rows == [0, 1] and mixed.group[2] is group[2]
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


def test_a_pool_of_the_previous_format_loads_and_a_newer_one_is_refused(exported, tmp_path):
    """pool.json of format 1 named its version ``schema_version`` (and its id, as format 2's,
    covered the trees only): such pools still load; a version this harnessctl does not know
    is refused with the file named."""
    import shutil

    from harnessctl.errors import HarnessctlError
    from harnessctl.pool.identity import trees_pool_id
    from harnessctl.pool.integrity import write_checksums

    _, out, names = exported
    for version, key in ((1, "schema_version"), (4, "version")):
        copy = tmp_path / f"v{version}"
        shutil.copytree(out, copy)
        manifest = json.loads((copy / "pool.json").read_text())
        del manifest["version"]
        manifest[key] = version
        if version == 1:
            for entry in manifest["harnesses"]:
                entry["profile"] = {
                    k: v for k, v in entry["profile"].items() if k not in ("split", "sha256")
                }
            manifest["pool_id"] = trees_pool_id([e["hash"] for e in manifest["harnesses"]])
        (copy / "pool.json").write_text(json.dumps(manifest))
        (copy / "SHA256SUMS").unlink()
        write_checksums(copy)
        if version == 1:
            assert sorted(Pool.load(copy).names) == sorted(names)
        else:
            with pytest.raises(HarnessctlError, match="pool.json: pool version 4 is not one"):
                Pool.load(copy)


def test_export_refuses_uncommitted_harness_changes(exported, tmp_path):
    ws, _, names = exported
    aux = next(n for n in names if n != "dbbench-base")
    target = ws / "harnesses" / aux / "prompts" / "big_prompt.md"
    original = target.read_text()
    target.write_text(original + "\nuncommitted\n")
    try:
        proc = cli(ws, "export-pool", "dbbench-base", aux, "--out", tmp_path / "p2", ok=False)
    finally:
        target.write_text(original)
    assert proc.returncode != 0
    assert "uncommitted changes" in proc.stderr and aux in proc.stderr
    assert not (tmp_path / "p2").exists()


# --- token-level rollouts, per-rollout policies, concurrency (issue #16) ---------------------


def test_token_level_rollout_is_stitched_from_the_servers_ids(exported):
    ws, out, _ = exported
    with OpenAIStub() as stub, Pool.load(out) as pool:
        stub.push(*(vllm_reply(r) for r in DBB_REPLIES))
        policy = EndpointPolicy(
            stub.url, "Qwen/Qwen2.5-7B-Instruct", api_key="sk-SECRET-123", tokens=True
        )
        result = pool.harness("dbbench-base").rollout(dbbench_record(ws), policy, seed=11)
        bodies = [r.body for r in stub.chat_requests]
        auth = stub.chat_requests[0].headers["authorization"]
    # the served name reaches the server as it is spelled (no provider read into "Qwen/")
    assert [b["model"] for b in bodies] == ["Qwen/Qwen2.5-7B-Instruct"] * 2
    assert all(b["seed"] == 11 and b["logprobs"] and b["return_token_ids"] for b in bodies)
    assert auth == "Bearer sk-SECRET-123"  # the credential reaches the server, nothing else
    dumped = json.dumps(result.row()) + result.trajectory.model_dump_json()
    assert "sk-SECRET-123" not in dumped
    first, second = result.calls
    assert first.prompt_ids == toy_prompt(first.messages)
    assert second.completion_ids == toy_ids(DBB_REPLIES[1]) + [END]
    seq = result.tokens()
    assert seq.append_only, seq.reason
    assert seq.prompt_ids == first.prompt_ids and seq.num_turns == 2
    # mask 1 exactly over what the policy generated, mask 0 over what the harness added
    replies = [seq.response_ids[a:b] for a, b in seq.turns]
    assert replies == [toy_ids(r) + [END] for r in DBB_REPLIES]
    assert [i for i, m in zip(seq.response_ids, seq.response_mask, strict=True) if m] == [
        *replies[0],
        *replies[1],
    ]
    between = bytes(
        i for i, m in zip(seq.response_ids, seq.response_mask, strict=True) if not m and i < 256
    ).decode()
    assert between == second.messages[-1]["content"]  # the observation the harness added
    assert len(seq.logprobs) == len(seq.response_ids)
    assert [lp for lp, m in zip(seq.logprobs, seq.response_mask, strict=True) if m] == (
        first.logprobs + second.logprobs
    )
    row = result.row()
    assert row["response_ids"] == seq.response_ids and row["reward"] == result.reward
    assert row["rollout_id"] == result.rollout_id == result.trajectory.rollout_id


def test_a_rewritten_context_is_said_and_the_calls_stay_usable():
    from harnessctl.pool.tokens import NoTokenIds, stitch
    from harnessctl.records import ModelCall

    def call(i, prompt, reply):
        return ModelCall(
            index=i,
            model="m",
            messages=[],
            prompt_ids=prompt,
            completion_ids=reply,
            logprobs=[-1.0] * len(reply),
        )

    ok = stitch([call(0, [1, 2], [3]), call(1, [1, 2, 3, 9], [4, 5])])
    assert ok.append_only and ok.response_ids == [3, 9, 4, 5]
    assert ok.response_mask == [1, 0, 1, 1] and ok.logprobs == [-1.0, 0.0, -1.0, -1.0]
    rewritten = stitch([call(0, [1, 2], [3]), call(1, [1, 7, 9], [4])])
    assert not rewritten.append_only and "token 1" in rewritten.reason
    assert rewritten.response_ids == [] and [s.response_ids for s in rewritten.samples] == [
        [3],
        [4],
    ]
    partial = stitch([call(0, [1, 2], [3]), ModelCall(index=1, model="m", messages=[])])
    assert not partial.append_only and "[1]" in partial.reason and len(partial.samples) == 1
    with pytest.raises(NoTokenIds, match="tokens=True"):
        stitch([ModelCall(index=0, model="m", messages=[])])


def test_a_dead_endpoint_is_an_infra_error_not_a_failed_task(exported):
    from harnessctl.pool import RolloutInfraError

    ws, out, _ = exported
    with Pool.load(out) as pool:
        policy = EndpointPolicy("http://127.0.0.1:9/v1", "Qwen/Qwen2.5-7B-Instruct")
        with pytest.raises(RolloutInfraError, match="failed outside the harness") as info:
            pool.base.rollout(dbbench_record(ws), policy, seed=0)
    assert info.value.output.outcome == "infra_error"


def test_rescue_with_a_per_rollout_policy_replaces_every_row_from_its_own_rollout(exported):
    """Each fresh rollout asks its own session endpoint (as rLLM's and OpenRLHF's per-session
    proxies are); every replaced row's tokens, mask, logprobs and reward come from the one
    sibling rollout that replaced it."""
    from harnessctl.pool import rescue_batch

    ws, out, _ = exported
    record = dbbench_record(ws)
    answer = 'Action: Answer\nFinal Answer: ["1.0"]'
    batch = [{"uid": "g", "record": record, "reward": 0.0, "response_ids": [7]} for _ in range(2)]
    with OpenAIStub() as a, OpenAIStub() as b, Pool.load(out) as pool:
        a.default, b.default = vllm_reply(answer, offset=0), vllm_reply(answer, offset=5000)
        stubs = {0: a, 1: b}
        result = rescue_batch(
            pool,
            batch,
            lambda slot: EndpointPolicy(stubs[slot.row].url, "ckpt", tokens=True),
            task_of=lambda s: s["record"],
            convert=lambda output, s: {**s, **output.row()},
            k=2,
            seed=40,
            max_workers=2,
            mix="replace",
        )
        seeds = {n: {r.body["seed"] for r in s.chat_requests} for n, s in stubs.items()}
    assert result.rescued_uids == ["g"]
    rows, fresh = result.samples, result.results["g"].attempted
    assert seeds == {0: {40}, 1: {41}}
    for n, (row, output) in enumerate(zip(rows, fresh, strict=True)):
        seq = output.tokens()
        assert row["rollout_id"] == output.rollout_id and row["reward"] == output.reward == 1.0
        assert row["response_ids"] == seq.response_ids and row["response_mask"] == seq.response_mask
        assert row["logprobs"] == seq.logprobs and row["seed"] == 40 + n
        offset = 5000 if n else 0
        assert row["prompt_ids"] == [i + offset for i in toy_prompt(output.calls[0].messages)]
        assert row["response_ids"][:-1] == [i + offset for i in toy_ids(answer)]


def test_rescue_sim_results_are_cached_per_task(exported, tmp_path, monkeypatch):
    from harnessctl.policy import Policy
    from harnessctl.pool.api import PoolHarness
    from harnessctl.pool.simulate import TaskCache, simulate

    ws, out, _ = exported
    tasks = load_suite(ws / "examples" / "dbbench").tasks("test").tasks[:4]
    policy = Policy("sim/dbbench")
    cache, seen = TaskCache(tmp_path / "cache"), []
    with Pool.load(out) as pool:
        first = simulate(
            pool, tasks, policy, group_size=2, cache=cache, progress=lambda *a: seen.append(a)
        )
        assert len(list((tmp_path / "cache").rglob("*.json"))) == 4

        def no_rollout(*args, **kwargs):
            raise AssertionError("a cached task was recomputed")

        monkeypatch.setattr(PoolHarness, "rollout", no_rollout)
        again = simulate(pool, tasks, policy, group_size=2, cache=cache)
        with pytest.raises(AssertionError, match="recomputed"):  # other settings, other key
            simulate(pool, tasks, policy, group_size=3, cache=cache)
    assert again == first
    assert seen[0] == ("start", 0, 4) and seen[-1] == ("task", 4, 4)


def test_concurrent_and_async_rescue_equal_sequential(exported):
    import asyncio

    from harnessctl.policy import Policy
    from harnessctl.pool import arescue_batch, rescue_batch

    ws, out, _ = exported
    report = json.loads(
        cli(ws, "rescue-sim", out, "--split", "test", "--group-size", 2, "--json").stdout
    )
    task_ids = [t["task_id"] for t in report["tasks"] if t["routed"]][:2]
    tasks = load_suite(ws / "examples" / "dbbench").tasks("test").by_id()
    batch = [{"uid": t, "reward": 0.0} for t in task_ids for _ in range(2)]
    kwargs = dict(task_of=lambda s: tasks[s["uid"]], convert=lambda o, s: o.row(), seed=3)
    policy = Policy("sim/dbbench")

    def shape(res):
        return [(r.get("harness"), r.get("seed"), r.get("outcome")) for r in res.samples], [
            (o.harness, o.seed, o.outcome) for x in res.results.values() for o in x.attempted
        ]

    with Pool.load(out) as pool:
        one = rescue_batch(pool, batch, policy, max_workers=1, **kwargs)
        many = rescue_batch(pool, batch, policy, max_workers=4, **kwargs)
        coro = asyncio.run(arescue_batch(pool, batch, policy, max_concurrency=4, **kwargs))
    # the default mix re-rolls one row of each two-row group (the other keeps its failure)
    assert one.extra_rollouts == 2 and shape(one) == shape(many) == shape(coro)
